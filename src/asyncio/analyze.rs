//! [`analyze`]: every pending task of the process, found, decoded, placed on the threads'
//! stacks and linked, in phases: the task objects ([`find_tasks`]), each decoded
//! ([`decode_tasks`]), their await chains and on-CPU frames ([`place_tasks`]), the event loops
//! and their threads ([`find_loops`]), who awaits whom ([`link_tasks`]), then what each
//! suspended task awaits and the await cycles.

use std::collections::HashSet;

use super::*;

/// An error entry: (address, what).
type Errors = Vec<ErrorReport>;

/// Every pending task of the process, placed and linked. `dbg` is the target's asyncio debug
/// section (3.14+), as `AsyncioDebug::find` found it.
pub fn analyze(
    snap: &Snapshot,
    threads: &[ThreadFrames],
    dbg: Result<Option<AsyncioDebug>, String>,
) -> Result<AsyncView, Error> {
    let mut view = AsyncView::default();
    let dbg = match dbg {
        Ok(d) => d,
        Err(e) => {
            view_err(&mut view.errors, 0, format!("asyncio debug section: {e}"));
            None
        }
    };
    let lay =
        AsyncioLayout::for_target(&snap.layout, dbg.as_ref()).map_err(Error::UnsupportedVersion)?;
    view.stack_top = Some(lay.stack_top);
    let errors = &mut view.errors;
    let (found, known_all) = find_tasks(snap, &lay, threads, errors)?;
    let objects = &Objects::new(snap, lay.clone(), known_all);
    let mut tasks = decode_tasks(snap, objects, found, errors);
    let (leaves, tops) = place_tasks(snap, objects, threads, &mut tasks, errors);
    view.loops = find_loops(snap, &lay, objects, threads, &mut tasks, &tops, errors);
    link_tasks(objects, &mut tasks, errors);
    // What each suspended task awaits (in parallel).
    let executor_workers = executor_jobs(objects, threads);
    // By index, and the results taken as the workers made them: 100,000 tasks' leaves and
    // results copied into vectors of their own were 22 MB of fresh memory.
    let suspended: Vec<usize> = (0..leaves.len())
        .filter(|&i| leaves[i].is_some() && tasks[i].on_cpu.is_none())
        .collect();
    let found =
        crate::parallel::map_iter(&suspended, PARALLEL_BATCH, snap.mem.any_thread(), |&i| {
            let leaf = leaves[i].clone()?;
            awaiting(objects, &tasks[i], leaf, &executor_workers)
        });
    for (&i, a) in suspended.iter().zip(found) {
        tasks[i].awaiting = a;
    }
    drop(leaves);
    // Cycles over "awaits" edges (owned edges are not waits).
    let mut awaits: AddrMap<Vec<u64>> = AddrMap::default();
    for t in &tasks {
        for w in &t.awaited_by {
            awaits.entry(*w).or_default().push(t.raw.addr);
        }
    }
    view.cycles = find_cycles(
        &tasks.iter().map(|t| t.raw.addr).collect::<Vec<_>>(),
        &awaits,
    );
    view.tasks = tasks;
    Ok(view)
}

/// The task objects (each with the interpreter that lists it, duplicates kept) and the known
/// asyncio types of each interpreter's registry.
#[allow(clippy::type_complexity)]
fn find_tasks(
    snap: &Snapshot,
    lay: &AsyncioLayout,
    threads: &[ThreadFrames],
    errors: &mut Errors,
) -> Result<(Vec<(u64, u64)>, Vec<KnownTypes>), Error> {
    let mut err = |addr: u64, what: String| view_err(errors, addr, what);
    let interps = snap.interpreters()?;
    // Each task object with the interpreter that lists it.
    let mut found: Vec<(u64, u64)> = Vec::new();
    let mut known_all: Vec<KnownTypes> = Vec::new();
    // 3.14+: native tasks on the lists of the threads that made them (each thread state of a
    // thread that entered subinterpreters), then of the interpreter (threads that have ended).
    if let Some(lists) = &lay.task_lists {
        for t in threads {
            for &(tstate, interp) in &t.tstates {
                let mut objs = Vec::new();
                list_tasks(
                    snap,
                    tstate.wrapping_add(lists.thread_head),
                    lists,
                    &mut objs,
                    &mut err,
                );
                found.extend(objs.into_iter().map(|o| (o, interp)));
            }
        }
        for interp in &interps {
            let mut objs = Vec::new();
            list_tasks(
                snap,
                interp.wrapping_add(lists.interp_head),
                lists,
                &mut objs,
                &mut err,
            );
            found.extend(objs.into_iter().map(|o| (o, *interp)));
        }
    }
    for interp in interps.iter().rev() {
        match registries(snap, lay, *interp) {
            Ok(Some((k, objs))) => {
                known_all.push(k);
                found.extend(objs.into_iter().map(|o| (o, *interp)));
            }
            Ok(None) => {}
            Err(e) => err(e.addr, format!("asyncio registry: {e}")),
        }
    }
    if let Some(k) = known_all
        .iter()
        .find(|k| k.c_task != 0)
        .filter(|_| !lay.c_objects)
    {
        // 3.14+ keeps C tasks only on lists the debug section locates: say so rather than show
        // an empty graph.
        err(
            k.c_task,
            "C asyncio tasks cannot be listed: the asyncio debug section was not found".into(),
        );
    }
    Ok((found, known_all))
}

/// Each task object decoded (in parallel), in the order of their names; at most
/// [`MAX_TASKS`], a cut said.
fn decode_tasks(
    snap: &Snapshot,
    objects: &Objects,
    found: Vec<(u64, u64)>,
    errors: &mut Errors,
) -> Vec<TaskView> {
    let mut err = |addr: u64, what: String| view_err(errors, addr, what);
    let mut seen = AddrSet::default();
    let mut unique: Vec<u64> = Vec::new();
    let mut interp_of: AddrMap<u64> = AddrMap::default();
    // Registries read one more than the cap, so that a cut is seen and said.
    let mut cut_at = None;
    for (obj, interp) in found {
        if !seen.insert(obj) {
            continue;
        }
        if seen.len() as u64 > MAX_TASKS {
            cut_at = Some(obj);
            break;
        }
        unique.push(obj);
        interp_of.insert(obj, interp);
    }
    // Each object on its own, in parallel; its error kept in order. The workers return the
    // task's fields only (a third of a `TaskView`), taken from their batches as they are.
    let decoded =
        crate::parallel::map_iter(&unique, PARALLEL_BATCH, snap.mem.any_thread(), |&obj| {
            match objects.class(obj) {
                Ok(Class::Task { c }) => match objects.task(obj, c) {
                    Ok(raw) if raw.state == "pending" => Ok(Some((raw, true))),
                    Ok(_) => Ok(None),
                    Err(e) => Err(format!("task: {e}")),
                },
                Ok(Class::None) => Ok(None),
                Ok(_) => {
                    // A task-like object that is not an asyncio.Task (registered by a third-party
                    // task factory): listed, not decoded.
                    let name_obj = objects.attr_or_zero(obj, "_name");
                    let name = snap
                        .read_str(name_obj)
                        .unwrap_or_else(|_| objects.type_name(obj));
                    let raw = RawTask {
                        addr: obj,
                        c: false,
                        type_name: objects.type_name(obj),
                        name,
                        state: "pending",
                        loop_: objects.attr_or_zero(obj, "_loop"),
                        coro: 0,
                        fut_waiter: 0,
                        awaited_by: Vec::new(),
                    };
                    Ok(Some((raw, false)))
                }
                Err(e) => Err(format!("task: {e}")),
            }
        });
    let mut raws: Vec<Option<(RawTask, bool)>> = Vec::with_capacity(unique.len());
    for (obj, d) in unique.iter().zip(decoded) {
        match d {
            Ok(Some(raw)) => raws.push(Some(raw)),
            Ok(None) => {}
            Err(what) => err(*obj, what),
        }
    }
    if let Some(obj) = cut_at {
        err(
            obj,
            format!("tasks: stopped at the limit of {MAX_TASKS} tasks"),
        );
    }
    // Each task is moved once, into its place: swapping whole tasks into order moved each
    // three times.
    let mut tasks: Vec<TaskView> = Vec::with_capacity(raws.len());
    for i in name_order(&raws) {
        if let Some((raw, supported)) = raws[i].take() {
            let mut t = TaskView::new(raw, supported);
            t.interp = interp_of.get(&t.raw.addr).copied().unwrap_or(0);
            tasks.push(t);
        }
    }
    tasks
}

/// The order of `raws` by their names ([`natural_parts`]), then their addresses. The keys
/// borrow the names (`sort_by_cached_key` would own two copies of each).
fn name_order(raws: &[Option<(RawTask, bool)>]) -> Vec<usize> {
    // (name without its last digits, their value, name, address).
    type Key<'a> = (&'a str, u64, &'a str, u64);
    let mut order: Vec<(Key, usize)> = raws
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let (raw, _) = r.as_ref()?;
            let (head, n) = natural_parts(&raw.name);
            Some(((head, n, raw.name.as_str(), raw.addr), i))
        })
        .collect();
    order.sort_unstable();
    order.into_iter().map(|(_, i)| i).collect()
}

/// Each task's await chain, and where an on-CPU task's frames are on its thread's stack:
/// the chains' leaves and the tasks' tops (thread, frame index), in `tasks`' order.
#[allow(clippy::type_complexity)]
fn place_tasks(
    snap: &Snapshot,
    objects: &Objects,
    threads: &[ThreadFrames],
    tasks: &mut [TaskView],
    errors: &mut Errors,
) -> (Vec<Option<Leaf>>, Vec<Option<(usize, usize)>>) {
    let mut err = |addr: u64, what: String| view_err(errors, addr, what);
    // Frames by address, over every thread.
    let mut frame_index: AddrMap<(usize, usize)> = AddrMap::default();
    for (ti, t) in threads.iter().enumerate() {
        for (i, item) in t.walk.items.iter().enumerate() {
            if let FrameItem::Python(p) = item {
                frame_index.insert(p.addr, (ti, i));
            }
        }
    }

    // Chains and on-CPU positions.
    let mut leaves: Vec<Option<Leaf>> = Vec::new();
    let mut tops: Vec<Option<(usize, usize)>> = Vec::new();
    let chains = crate::parallel::map_iter(tasks, PARALLEL_BATCH, snap.mem.any_thread(), |t| {
        t.supported.then(|| {
            let chain = objects.chain(t.raw.coro);
            let pos = top_frame(objects, t.raw.coro).and_then(|f| frame_index.get(&f).copied());
            (chain, pos)
        })
    });
    for (t, c) in tasks.iter_mut().zip(chains) {
        let Some((chain, pos)) = c else {
            leaves.push(None);
            tops.push(None);
            continue;
        };
        if let Leaf::Error(e) = &chain.leaf {
            err(
                t.raw.addr,
                format!("task {:?}: await chain: {e}", t.raw.name),
            );
        }
        if matches!(chain.leaf, Leaf::Running) && pos.is_none() {
            // `_enter_task` done but the step not started, or a step ending: its chain is
            // shown as it is (asyncio.md §5.3).
            err(
                t.raw.addr,
                format!(
                    "task {:?}: its coroutine is running but on no thread's stack (stopped between steps)",
                    t.raw.name
                ),
            );
        }
        t.frames = chain.frames;
        t.on_cpu = pos.map(|(ti, _)| ti);
        leaves.push(Some(chain.leaf));
        tops.push(pos);
    }
    // Cut each thread's stack at every task top: a task's live frames run from just below the
    // next newer task top down to its own top.
    let mut tops_by_thread: HashMap<usize, Vec<usize>> = HashMap::new();
    for (ti, idx) in tops.iter().flatten() {
        tops_by_thread.entry(*ti).or_default().push(*idx);
    }
    for v in tops_by_thread.values_mut() {
        v.sort_unstable();
    }
    for (i, pos) in tops.iter().enumerate() {
        let Some((ti, idx)) = *pos else { continue };
        let sorted = &tops_by_thread[&ti];
        let at = sorted.partition_point(|x| *x < idx);
        let start = if at == 0 { 0 } else { sorted[at - 1] + 1 };
        tasks[i].frames = threads[ti].walk.items[start..=idx].to_vec();
    }

    (leaves, tops)
}

/// The event loops, each with the thread that runs it and its frames from the loop outwards;
/// and each task's thread.
fn find_loops(
    snap: &Snapshot,
    lay: &AsyncioLayout,
    objects: &Objects,
    threads: &[ThreadFrames],
    tasks: &mut [TaskView],
    tops: &[Option<(usize, usize)>],
    errors: &mut Errors,
) -> Vec<LoopView> {
    let mut err = |addr: u64, what: String| view_err(errors, addr, what);
    let mut loops = Vec::new();
    // Loops and the threads that run them: first each thread's own running-loop state (any
    // event loop, uvloop included), else the newest frame whose `self` is the loop
    // (`BaseEventLoop._run_once`, for the pure-Python asyncio whose state is a
    // `threading.local`).
    let mut running: AddrMap<usize> = AddrMap::default();
    for (ti, t) in threads.iter().enumerate() {
        for &(tstate, _) in &t.tstates {
            match running_loop(snap, lay, tstate) {
                Ok(Some(l)) => {
                    running.entry(l).or_insert(ti);
                }
                Ok(None) => {}
                Err(e) => err(
                    e.addr,
                    format!("running loop of thread {:?}: {e}", t.native_id),
                ),
            }
        }
    }
    let mut loop_addrs: Vec<u64> = tasks
        .iter()
        .map(|t| t.raw.loop_)
        .filter(|l| *l != 0)
        .chain(running.keys().copied())
        .collect();
    loop_addrs.sort_unstable();
    loop_addrs.dedup();
    // The oldest on-CPU task top of each (loop, thread).
    let mut oldest_top: HashMap<(u64, usize), usize> = HashMap::new();
    for (task, pos) in tasks.iter().zip(tops) {
        if let Some((ti, idx)) = *pos {
            let e = oldest_top.entry((task.raw.loop_, ti)).or_insert(idx);
            *e = (*e).max(idx);
        }
    }
    for l in loop_addrs {
        let mut lv = LoopView {
            addr: l,
            type_name: objects.type_name(l),
            thread: None,
            upper: Vec::new(),
            upper_start: 0,
        };
        let self_frame = |t: &ThreadFrames| {
            t.walk.items.iter().position(|item| {
                matches!(item, FrameItem::Python(p)
                    if p.code.argcount >= 1 && objects.local0(p.addr).ok() == Some(l))
            })
        };
        if let Some(&ti) = running.get(&l) {
            let t = &threads[ti];
            lv.thread = Some(ti);
            // Frames older than the loop's oldest running task, else from `_run_once`, else
            // (a loop written in C, such as uvloop, idle) every Python frame of the thread.
            let from = match oldest_top.get(&(l, ti)) {
                Some(idx) => idx + 1,
                None => self_frame(t).unwrap_or(0),
            };
            lv.upper_start = from.min(t.walk.items.len());
            lv.upper = t.walk.items[lv.upper_start..].to_vec();
        } else {
            for (ti, t) in threads.iter().enumerate() {
                if let Some(idx) = oldest_top.get(&(l, ti)) {
                    lv.thread = Some(ti);
                    lv.upper_start = idx + 1;
                    lv.upper = t.walk.items[idx + 1..].to_vec();
                    break;
                }
                if let Some(i) = self_frame(t) {
                    lv.thread = Some(ti);
                    lv.upper_start = i;
                    lv.upper = t.walk.items[i..].to_vec();
                    break;
                }
            }
        }
        loops.push(lv);
    }
    for t in tasks.iter_mut() {
        t.thread = t.on_cpu.or_else(|| {
            loops
                .iter()
                .find(|l| l.addr == t.raw.loop_)
                .and_then(|l| l.thread)
        });
    }

    loops
}

/// Who awaits whom: each task's `awaited_by` (suspended waiters) and `owned_by` (running
/// owners: a TaskGroup, a gather).
fn link_tasks(objects: &Objects, tasks: &mut [TaskView], errors: &mut Errors) {
    let mut err = |addr: u64, what: String| view_err(errors, addr, what);
    let index: AddrMap<usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.raw.addr, i))
        .collect();
    let on_cpu: AddrSet = tasks
        .iter()
        .filter(|t| t.on_cpu.is_some())
        .map(|t| t.raw.addr)
        .collect();
    // Edges (awaited, waiter), found for each batch of tasks in parallel, each batch with a
    // resolver of its own: a done callback that many tasks share (gather's) is followed once
    // a batch, and an error met in several batches is said once, where the first met it.
    let batches: Vec<&[TaskView]> = tasks.chunks(LINK_BATCH).collect();
    let found = crate::parallel::map_iter(&batches, 1, objects.snap.mem.any_thread(), |b| {
        batch_edges(objects, b, &index)
    });
    let mut edges: Vec<(u64, u64)> = Vec::new();
    let mut said: HashSet<(u64, String)> = HashSet::new();
    for (mut e, errs) in found {
        edges.append(&mut e);
        for e in errs {
            if said.insert((e.address, e.what.clone())) {
                err(e.address, e.what);
            }
        }
    }
    // In order, each once (a set's order, without its nodes).
    edges.sort_unstable();
    edges.dedup();
    for (awaited, waiter) in &edges {
        if let Some(t) = index.get(awaited).map(|&i| &mut tasks[i]) {
            if on_cpu.contains(waiter) {
                t.owned_by.push(*waiter);
            } else {
                t.awaited_by.push(*waiter);
            }
        }
    }
}

/// Tasks one resolver of [`link_tasks`] links.
const LINK_BATCH: usize = 4096;

/// The edges (awaited, waiter) between `tasks` and the tasks of `index`, from the waiters of
/// each (its `_fut_waiter`, 3.14's awaiters, its done callbacks), and the errors met.
fn batch_edges(
    objects: &Objects,
    tasks: &[TaskView],
    index: &AddrMap<usize>,
) -> (Vec<(u64, u64)>, Vec<ErrorReport>) {
    let mut resolver = Resolver {
        o: objects,
        memo: AddrMap::default(),
        by_callback: AddrMap::default(),
        active: AddrSet::default(),
        errors: Vec::new(),
    };
    let mut edges = Vec::new();
    for t in tasks.iter().filter(|t| t.supported) {
        let fw = t.raw.fut_waiter;
        if fw != 0 && index.contains_key(&fw) && fw != t.raw.addr {
            edges.push((fw, t.raw.addr));
        }
        // 3.14+: the awaiters the runtime records.
        for w in &t.raw.awaited_by {
            if *w != t.raw.addr && index.contains_key(w) {
                edges.push((t.raw.addr, *w));
            }
        }
        for w in resolver.waiters(t.raw.addr, t.raw.c, 0) {
            if w != t.raw.addr && index.contains_key(&w) {
                edges.push((t.raw.addr, w));
            }
        }
    }
    (edges, resolver.errors)
}
