//! Greenlets over a stop: every greenlet decoded once ([`view`]) and added to a report
//! (`--greenlets`; `py-greenlets` renders it, [`crate::report::views`]).

use super::report::{frame_report, interpreter_id, thread_frame_report};
use super::{once, Session};
use crate::binary::ElfInfo;
use crate::greenlet::{self, GThread, GreenletView, Stacks};
use crate::model::{FrameReport, GreenletReport, Report};

/// Every greenlet, decoded once per stop.
pub fn view(s: &Session) -> &GreenletView {
    once(&s.greenlet_view, || {
        let threads: Vec<GThread> = s
            .threads()
            .iter()
            .map(|t| GThread {
                interps: t.states().map(|i| i.interp).collect(),
                native_id: t.info.native_id,
                pthread: t.info.thread_id,
                walk: &t.walk,
            })
            .collect();
        let files: Vec<(u64, u64)> = s.target.mappings.iter().map(|m| (m.start, m.end)).collect();
        let stacks = Stacks {
            regions: &s.target.regions,
            anchors: &s.target.stack_anchors,
            main_stack: if s.target.regions.is_empty() {
                main_stack(s)
            } else {
                None
            },
            files,
            raw: Some(s.target.mem.clone()),
        };
        greenlet::analyze(&s.snap, &threads, &stacks)
    })
}

/// The main thread's LWP (the process id) and the top of its stack, glibc's
/// `__libc_stack_end` (the dynamic linker's, set from the stack the kernel started the
/// process on: elf/dl-support.c, `_dl_sysdep_start`); None for a static executable, or where
/// the process id or the dynamic linker's file is not known.
fn main_stack(s: &Session) -> Option<(u64, u64)> {
    const SYMBOL: &str = "__libc_stack_end";
    let pid = u64::from(s.target.pid?);
    let ld = s
        .target
        .modules()
        .into_iter()
        .find(|m| m.file_name().starts_with("ld-linux"))?;
    let info = ElfInfo::load(&s.target.real_path(&ld.path).ok()?, &[SYMBOL]).ok()?;
    let at = ld
        .base
        .wrapping_sub(info.first_vaddr)
        .wrapping_add(*info.symbols.get(SYMBOL)?);
    Some((pid, s.snap.mem.read_ptr(at).ok()?))
}

/// `r` with every greenlet (`--greenlets`, `py-greenlets`), and what could not be read of
/// them among its errors. The addresses of the sockets they wait on are [`crate::why`]'s
/// ([`crate::why::add_greenlets`]).
pub fn add_to(s: &Session, r: &mut Report, with_locals: bool) {
    let view = view(s);
    let threads = s.threads();
    r.greenlets = Some(
        view.greenlets
            .iter()
            .map(|g| GreenletReport {
                address: g.addr,
                thread: g.thread.and_then(|i| threads[i].info.native_id),
                state: g.state,
                main: g.main,
                parent: g.parent,
                type_name: g.type_name.clone(),
                name: g.name.clone(),
                function: g.function.clone(),
                // A running greenlet's frames are its thread's (across the interpreters the
                // thread entered); a suspended one's run in the interpreter that made it.
                frames: match (g.state, g.thread.and_then(|i| threads.get(i))) {
                    (greenlet::State::Running, Some(t)) => g
                        .frames
                        .iter()
                        .enumerate()
                        .map(|(k, i)| thread_frame_report(s, t, k, i, with_locals))
                        .collect(),
                    _ => {
                        let id = interpreter_id(s, g.interp);
                        g.frames
                            .iter()
                            .map(|i| FrameReport {
                                interpreter_id: id,
                                ..frame_report(s, i, with_locals)
                            })
                            .collect()
                    }
                },
                truncated: g.truncated,
                waiting: g.waiting.clone(),
            })
            .collect(),
    );
    r.errors.extend(view.errors.iter().cloned());
}
