//! Numbers appended to text without `core::fmt`: the task tree and table of 100,000 tasks
//! write a task id and a line number or two per line, and `write!` cost about 250
//! instructions each (a fifth of the text's time).

/// Appends `v` in decimal (as `{v}` does).
pub fn push_decimal(text: &mut String, mut v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    push_ascii(text, &digits[at..]);
}

/// Appends `v` in lower-case hexadecimal after `0x` (as `{v:#x}` does).
pub fn push_hex(text: &mut String, mut v: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut digits = [0u8; 18];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = DIGITS[(v & 0xf) as usize];
        v >>= 4;
        if v == 0 {
            break;
        }
    }
    at -= 2;
    digits[at] = b'0';
    digits[at + 1] = b'x';
    push_ascii(text, &digits[at..]);
}

fn push_ascii(text: &mut String, ascii: &[u8]) {
    // Digits and `x` only: ASCII, so always UTF-8.
    text.push_str(std::str::from_utf8(ascii).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_core_fmt_writes_them() {
        for v in [
            0,
            1,
            9,
            10,
            15,
            16,
            255,
            4096,
            0xdead_beef,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut text = String::from("<");
            push_decimal(&mut text, v);
            text.push(' ');
            push_hex(&mut text, v);
            assert_eq!(text, format!("<{v} {v:#x}"));
        }
    }
}
