//! Finding CPython in a target: which module holds `_PyRuntime`, where it is, which version,
//! which layout. Each step names the strategy that worked (reported in `python.found_by`).

use super::debug_offsets::DebugOffsets;
use super::key_hints::KeyHints;
use super::known_codes::KnownCodes;
use super::layout::Layout;
use super::version::Version;
use crate::binary::{ElfInfo, Module};
use crate::error::{Error, Result};
use crate::target::Target;

#[derive(Clone, Debug)]
pub struct Found {
    pub module: Module,
    pub runtime: u64,
    pub layout: Layout,
    /// e.g. "dynamic symbol _PyRuntime in libpython3.12.so.1.0; version from Py_Version".
    pub found_by: String,
    pub arch: crate::arch::Arch,
    /// `_PyJIT_Entry` (3.15 exports it: the JIT's entry shim), read from the same module's
    /// symbols as `_PyRuntime`.
    pub jit_entry: Option<u64>,
    /// Where dict keys were found, shared with the stops before and after this one.
    pub keys: KeyHints,
    /// Code objects decoded, shared with the stops before and after this one.
    pub codes: KnownCodes,
}

/// What a frontend keeps of a discovery between stops of one target, so that a later stop
/// reads no ELF symbols ([`find_python_again`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remembered {
    /// Address of `_PyRuntime`.
    pub runtime: u64,
    /// 3.<minor>.
    pub minor: u8,
    /// Address of `_PyJIT_Entry`, if the module has it.
    pub jit_entry: Option<u64>,
    /// Where dict keys were found ([`KeyHints`]).
    pub keys: KeyHints,
    /// Code objects decoded ([`KnownCodes`]).
    pub codes: KnownCodes,
}

impl Found {
    pub fn remembered(&self) -> Remembered {
        Remembered {
            runtime: self.runtime,
            minor: self.layout.version.minor,
            jit_entry: self.jit_entry,
            keys: self.keys.clone(),
            codes: self.codes.clone(),
        }
    }
}

const SYMBOLS: [&str; 3] = ["_PyRuntime", "Py_Version", "_PyJIT_Entry"];

/// Modules that may hold the interpreter: libpython first, then executables named python*.
fn candidates(modules: &[Module]) -> Vec<&Module> {
    let mut c: Vec<&Module> = modules
        .iter()
        .filter(|m| m.file_name().starts_with("libpython3"))
        .collect();
    c.extend(modules.iter().filter(|m| {
        let n = m.file_name();
        n.starts_with("python") || n.contains("python3")
    }));
    let mut seen = std::collections::HashSet::new();
    c.retain(|m| seen.insert(m.path.as_str()));
    c
}

pub fn find_python(target: &Target) -> Result<Found> {
    let modules = target.modules();
    let cands = candidates(&modules);
    if cands.is_empty() {
        return Err(Error::NoPython(format!(
            "none of the {} mapped files is libpython or a python executable",
            modules.len()
        )));
    }
    let mut tried = Vec::new();
    for m in cands {
        let info = match target
            .real_path(&m.path)
            .and_then(|path| ElfInfo::load(&path, &SYMBOLS))
        {
            Ok(i) => i,
            Err(e) => {
                tried.push(format!("{e}"));
                continue;
            }
        };
        let bias = m.base.wrapping_sub(info.first_vaddr);
        let (runtime, how) = if let Some(a) = info.symbols.get("_PyRuntime") {
            (bias.wrapping_add(*a), "symbol _PyRuntime")
        } else if let Some((a, _)) = info.sections.get(".PyRuntime") {
            (bias.wrapping_add(*a), "section .PyRuntime")
        } else {
            tried.push(format!("{}: no _PyRuntime symbol", m.file_name()));
            continue;
        };
        let (version, vhow) = detect_version(target, &info, bias, m)?;
        let layout = choose_layout(target, runtime, version)?;
        let found_by = format!(
            "{how} in {}; version from {vhow}; layout {}",
            m.file_name(),
            layout.source
        );
        return Ok(Found {
            module: m.clone(),
            runtime,
            layout,
            found_by,
            arch: target.arch,
            jit_entry: info
                .symbols
                .get("_PyJIT_Entry")
                .map(|a| bias.wrapping_add(*a)),
            keys: KeyHints::default(),
            codes: KnownCodes::default(),
        });
    }
    Err(Error::NoPython(tried.join("; ")))
}

/// CPython where an earlier stop of the same target found it: `_PyRuntime` at the remembered
/// address, in whichever mapped file holds it now, and its layout chosen again from the
/// remembered minor version and the target's `_Py_DebugOffsets`, as [`find_python`] chooses
/// it. No ELF symbols are read.
pub fn find_python_again(target: &Target, earlier: &Remembered) -> Result<Found> {
    let module = target
        .modules()
        .into_iter()
        .find(|m| m.start <= earlier.runtime && earlier.runtime < m.end)
        .ok_or_else(|| {
            Error::NoPython(format!(
                "no mapped file holds _PyRuntime at {:#x}",
                earlier.runtime
            ))
        })?;
    let layout = choose_layout(target, earlier.runtime, Version::new(3, earlier.minor, 0))?;
    Ok(Found {
        found_by: format!("_PyRuntime of an earlier stop; layout {}", layout.source),
        module,
        runtime: earlier.runtime,
        layout,
        arch: target.arch,
        jit_entry: earlier.jit_entry,
        keys: earlier.keys.clone(),
        codes: earlier.codes.clone(),
    })
}

fn detect_version(
    target: &Target,
    info: &ElfInfo,
    bias: u64,
    m: &Module,
) -> Result<(Version, &'static str)> {
    if let Some(a) = info.symbols.get("Py_Version") {
        if let Some(v) = target
            .mem
            .read_u32(bias.wrapping_add(*a))
            .ok()
            .and_then(|h| Version::from_hex(h as u64))
        {
            return Ok((v, "Py_Version"));
        }
    }
    if let Some(v) = target
        .real_path(&m.path)
        .ok()
        .and_then(|p| version_string(&p))
    {
        return Ok((v, "version string in .rodata"));
    }
    if let Some(v) = version_from_name(m.file_name()) {
        return Ok((v, "file name"));
    }
    Err(Error::NoPython(format!(
        "cannot tell the Python version of {}",
        m.path
    )))
}

/// `PY_VERSION` ("3.10.13") as a NUL-terminated string in `.rodata` (3.10 has no `Py_Version`).
fn version_string(path: &str) -> Option<Version> {
    let data = ElfInfo::section_data(path, ".rodata").ok()??;
    let mut best: Option<Version> = None;
    for (i, w) in data.windows(3).enumerate() {
        if w != b"3.1" {
            continue;
        }
        let tail = &data[i..data.len().min(i + 16)];
        let Some(end) = tail.iter().position(|&c| c == 0) else {
            continue;
        };
        let s = std::str::from_utf8(&tail[..end]).ok()?;
        if s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '+')
            && s.matches('.').count() == 2
        {
            if let Some(v) = Version::parse(s) {
                if (10..=15).contains(&v.minor) {
                    best = Some(v);
                    break;
                }
            }
        }
    }
    best
}

fn version_from_name(name: &str) -> Option<Version> {
    let i = name.find("python3.")? + "python".len();
    let digits: String = name[i + 2..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    Some(Version::new(3, digits.parse().ok()?, 0))
}

pub fn choose_layout(target: &Target, runtime: u64, version: Version) -> Result<Layout> {
    let builtin = Layout::builtin(version);
    if version.minor >= 13 {
        match DebugOffsets::read(&*target.mem, runtime) {
            Ok(d) => {
                let base = if d.free_threaded {
                    Layout::builtin_free_threaded(version).ok_or_else(|| {
                        Error::UnsupportedVersion(format!(
                            "{version} free-threaded (3.13 is supported)"
                        ))
                    })?
                } else if let Some(b) = builtin {
                    b
                } else {
                    return Err(Error::UnsupportedVersion(version.to_string()));
                };
                return base.with_debug_offsets(&d).map_err(Error::from);
            }
            Err(_) if builtin.is_some() => {}
            Err(e) => {
                return Err(Error::UnsupportedVersion(format!(
                    "{version} (and its _Py_DebugOffsets: {e})"
                )))
            }
        }
    }
    builtin.ok_or_else(|| Error::UnsupportedVersion(version.to_string()))
}
