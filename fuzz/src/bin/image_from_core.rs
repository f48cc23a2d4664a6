//! `image-from-core CORE OUT [--exe PATH]`: decode a real core as `pyunwind core --locals
//! --tasks` does, recording every range of memory read, and write those ranges as a memory
//! image (the seed corpus of the `decoders` fuzz target).

use std::sync::Arc;

use pyunwind::session::{self, Session};
use pyunwind::target::Target;
use pyunwind_fuzz::{Image, Recorder};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: image-from-core CORE OUT [--exe PATH]");
        std::process::exit(2);
    }
    let exe = args
        .iter()
        .position(|a| a == "--exe")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    let mut target = match Target::core(&args[1], exe) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("image-from-core: {e}");
            std::process::exit(1);
        }
    };
    let recorder = Arc::new(Recorder::new(target.mem.clone()));
    target.mem = recorder.clone();
    let session = match Session::open(target) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("image-from-core: {e}");
            std::process::exit(1);
        }
    };
    let _ = session::report::report(&session, None, true);
    let _ = session::asyncio::report(&session);
    let layout = &session.snap.layout;
    let image = Image::write(
        layout.version,
        layout.free_threaded,
        session.snap.runtime,
        &recorder.ranges(),
    );
    // The image must stand for the stop: the decoders find the same frames in it alone.
    let want: usize = session.threads().iter().map(|t| t.walk.items.len()).sum();
    let got = pyunwind_fuzz::run_decoders(&image);
    if got == 0 || got > want {
        eprintln!("image-from-core: {got} frames decoded from the image, {want} in the core");
        std::process::exit(1);
    }
    if let Err(e) = std::fs::write(&args[2], image) {
        eprintln!("image-from-core: {}: {e}", args[2]);
        std::process::exit(1);
    }
    println!("{}: {got} of {want} frames decoded from the image", args[2]);
}
