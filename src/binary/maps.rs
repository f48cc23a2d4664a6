//! `/proc/PID/maps` (and `info proc mappings`-like text handed over by a debugger).

use super::FileMapping;
use crate::error::{Error, Result};

pub fn read_proc_maps(pid: i32) -> Result<Vec<FileMapping>> {
    Ok(parse_proc_maps(&read_proc_maps_text(pid)?))
}

/// The text of `/proc/PID/maps`, or one error that names the pid.
pub fn read_proc_maps_text(pid: i32) -> Result<String> {
    let path = format!("/proc/{pid}/maps");
    std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Usage(format!("no process with pid {pid}")),
        _ => Error::io(path, e),
    })
}

/// File-backed mappings of a `/proc/PID/maps` text: `start-end perms offset dev inode path`.
pub fn parse_proc_maps(text: &str) -> Vec<FileMapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(off), Some(_dev), Some(_inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.collect::<Vec<_>>().join(" ");
        if !path.starts_with('/') {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        let path = path.strip_suffix(" (deleted)").unwrap_or(&path).to_string();
        out.push(FileMapping {
            start,
            end,
            offset,
            path,
        });
    }
    out
}

/// `[start, end)` of one mapping.
pub type Range = (u64, u64);

/// Every mapping of a `/proc/PID/maps` text, file-backed or not, as `[start, end)` in the
/// text's (ascending) order, and the main thread's stack (`[stack]`).
pub fn parse_proc_regions(text: &str) -> (Vec<Range>, Option<Range>) {
    let mut out = Vec::new();
    let mut stack = None;
    for line in text.lines() {
        let Some((s, e)) = line
            .split_ascii_whitespace()
            .next()
            .and_then(|r| r.split_once('-'))
        else {
            continue;
        };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(s, 16), u64::from_str_radix(e, 16)) else {
            continue;
        };
        // An inaccessible reservation (a guard page, an allocator's reserved arena) holds
        // nothing to read.
        if line.split_ascii_whitespace().nth(1) == Some("---p") {
            continue;
        }
        if line.ends_with(" [stack]") {
            stack = Some((start, end));
        }
        out.push((start, end));
    }
    (out, stack)
}

/// `[start, end)` of the /proc/PID/maps line of a region the kernel names (`[vdso]`).
pub fn proc_maps_named(text: &str, name: &str) -> Option<Range> {
    let line = text
        .lines()
        .find(|l| l.split_ascii_whitespace().nth(5) == Some(name))?;
    let (s, e) = line.split_ascii_whitespace().next()?.split_once('-')?;
    Some((
        u64::from_str_radix(s, 16).ok()?,
        u64::from_str_radix(e, 16).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn regions_include_anonymous_mappings_and_the_stack() {
        let t = "55d0c0000000-55d0c0001000 r--p 00000000 fe:01 123 /usr/bin/python3.11\n\
                 7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n\
                 7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n";
        let (r, stack) = parse_proc_regions(t);
        assert_eq!(r.len(), 3);
        assert_eq!(r[1], (0x7f0000000000, 0x7f0000021000));
        assert_eq!(stack, Some((0x7ffc00000000, 0x7ffc00021000)));
    }
    #[test]
    fn the_vdso_is_found_by_its_name_alone() {
        let t =
            "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n\
                 7ffc0012c000-7ffc00130000 r--p 00000000 00:00 0                          [vvar]\n\
                 7ffc00130000-7ffc00132000 r-xp 00000000 00:00 0                          [vdso]\n\
                 7f0000100000-7f0000200000 r-xp 00002000 fe:01 456 /opt/[vdso]\n";
        assert_eq!(
            proc_maps_named(t, "[vdso]"),
            Some((0x7ffc00130000, 0x7ffc00132000))
        );
        assert_eq!(proc_maps_named("", "[vdso]"), None);
        assert_eq!(proc_maps_named("zz-1 r-xp 0 0 0 [vdso]\n", "[vdso]"), None);
    }
    #[test]
    fn parses_file_backed_lines_only() {
        let t = "55d0c0000000-55d0c0001000 r--p 00000000 fe:01 123 /usr/bin/python3.11\n\
                 7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n\
                 7f0000100000-7f0000200000 r-xp 00002000 fe:01 456 /opt/my lib/libpython3.12.so.1.0\n";
        let m = parse_proc_maps(t);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].path, "/opt/my lib/libpython3.12.so.1.0");
        assert_eq!(m[1].offset, 0x2000);
    }
}
