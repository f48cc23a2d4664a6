//! Library code, by a file's path: the interpreter's own standard library and installed
//! packages, told apart from the application's own code (the verdict names the application's
//! frame: a task group's place, the straggler verdict's majority).

/// The library a file is in, by its path: the first name under the interpreter's own
/// `lib/pythonX.Y` (`X.Yt` free-threaded) or a `site-packages` or `dist-packages` (a package,
/// or a module without its `.py`), or a frozen module's (`<frozen importlib._bootstrap>`:
/// `importlib`). None for the application's own code.
pub fn library_of(file: &str) -> Option<&str> {
    if let Some(m) = file.strip_prefix("<frozen ") {
        let m = m.strip_suffix('>')?;
        return m.split('.').next().filter(|n| !n.is_empty());
    }
    let rest = ["/site-packages/", "/dist-packages/"]
        .iter()
        .find_map(|d| file.rfind(d).map(|i| &file[i + d.len()..]))
        .or_else(|| stdlib_rest(file))?;
    let name = rest.split('/').next()?;
    let name = name.strip_suffix(".py").unwrap_or(name);
    (!name.is_empty()).then_some(name)
}

/// What follows the interpreter's own `lib/pythonX.Y/` (or `X.Yt/`) in a path.
fn stdlib_rest(file: &str) -> Option<&str> {
    let mut from = 0;
    while let Some(i) = file[from..].find("/lib/python") {
        let at = from + i + "/lib/python".len();
        let rest = &file[at..];
        let (ver, tail) = rest.split_once('/')?;
        let ver = ver.strip_suffix('t').unwrap_or(ver);
        let ok = ver.split_once('.').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        });
        if ok {
            return Some(tail);
        }
        from = at;
    }
    None
}
