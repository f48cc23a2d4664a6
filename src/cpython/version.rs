//! The CPython version of a target.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u8,
    pub minor: u8,
    pub micro: u8,
    /// PY_RELEASE_LEVEL: 0xA alpha, 0xB beta, 0xC candidate, 0xF final.
    pub level: u8,
    pub serial: u8,
}

impl Version {
    pub const fn new(major: u8, minor: u8, micro: u8) -> Self {
        Version {
            major,
            minor,
            micro,
            level: 0xF,
            serial: 0,
        }
    }
    /// From PY_VERSION_HEX (Include/patchlevel.h), as in `Py_Version` and `_Py_DebugOffsets`.
    pub fn from_hex(hex: u64) -> Option<Self> {
        let v = Version {
            major: (hex >> 24) as u8,
            minor: (hex >> 16) as u8,
            micro: (hex >> 8) as u8,
            level: ((hex >> 4) & 0xF) as u8,
            serial: (hex & 0xF) as u8,
        };
        (v.major == 3 && matches!(v.level, 0xA | 0xB | 0xC | 0xF)).then_some(v)
    }
    /// From a string such as "3.10.13" or "3.13.0rc2".
    pub fn parse(s: &str) -> Option<Self> {
        let mut parts = s.splitn(3, '.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let rest = parts.next().unwrap_or("0");
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let micro = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        let (level, serial) = match tail.get(..1) {
            None | Some("+") => (0xF, 0),
            Some("a") => (0xA, tail[1..].parse().unwrap_or(0)),
            Some("b") => (0xB, tail[1..].parse().unwrap_or(0)),
            Some("r") => (0xC, tail.trim_start_matches("rc").parse().unwrap_or(0)),
            _ => return None,
        };
        (major == 3).then_some(Version {
            major,
            minor,
            micro,
            level,
            serial,
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.micro)?;
        match self.level {
            0xA => write!(f, "a{}", self.serial),
            0xB => write!(f, "b{}", self.serial),
            0xC => write!(f, "rc{}", self.serial),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn hex_and_strings() {
        assert_eq!(Version::from_hex(0x030d00f0).unwrap().to_string(), "3.13.0");
        assert_eq!(
            Version::from_hex(0x030e00a2).unwrap().to_string(),
            "3.14.0a2"
        );
        assert!(Version::from_hex(0xdeadbeef).is_none());
        assert_eq!(Version::parse("3.10.13").unwrap(), Version::new(3, 10, 13));
        assert_eq!(
            Version::parse("3.13.0rc2").unwrap().to_string(),
            "3.13.0rc2"
        );
        assert!(Version::parse("2.7.18").is_none());
    }
}
