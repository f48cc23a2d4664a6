//! `pyunwind`: every thread's Python stack from a live process or a core file (see
//! [`pyunwind::cli`]). This binary is for cargo users; the pip package runs the same code.

use std::process::ExitCode;

fn main() -> ExitCode {
    let scripts = std::env::current_exe()
        .ok()
        .and_then(|exe| pyunwind::cli::Scripts::of_checkout(&exe));
    let code = pyunwind::cli::main(std::env::args_os(), scripts);
    ExitCode::from(code.clamp(0, 255) as u8)
}
