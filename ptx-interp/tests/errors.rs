//! Every fault is reported, with the entry, instruction, line, block, thread and address:
//! out-of-bounds global and shared accesses, misaligned accesses, deadlocks, a membermask lane
//! that exited, an endless loop, bad PTX and bad launches.

use memc_ptx_interp::{Error, Fault, Launch, Memory, Module};

const HEADER: &str = ".version 8.0\n.target sm_80\n.address_size 64\n";

/// An entry `k` with the usual registers around `body`.
fn entry(body: &str) -> String {
    format!(
        "{HEADER}.visible .entry k(.param .u64 arena, .param .u64 weights, .param .u64 state)\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<4>;\n\
         \t.shared .align 16 .b8 sdata[256];\n\
         \tld.param.u64 %rd1, [arena];\n\tmov.u32 %r1, %tid.x;\n{body}\tret;\n}}\n"
    )
}

fn run(text: &str, threads: u32, arena_bytes: usize) -> (Result<(), Error>, u64) {
    let m = Module::parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mut mem = Memory::new();
    let arena = mem.add(vec![0; arena_bytes]);
    let l = Launch {
        grid: [2, 1, 1],
        block: [threads, 1, 1],
        shared_bytes: 0,
    };
    (
        m.launch("k", l, &[arena, 0, 0], &mut mem).map(|_| ()),
        arena,
    )
}

fn fault(r: Result<(), Error>) -> (Fault, [u32; 3], [u32; 3], usize, String) {
    match r {
        Err(Error::Fault {
            entry,
            block,
            thread,
            line,
            instruction,
            fault,
        }) => {
            assert_eq!(entry, "k");
            (fault, block, thread, line, instruction)
        }
        other => panic!("expected a fault, got {other:?}"),
    }
}

#[test]
fn out_of_bounds_global_load() {
    let body =
        "\tmul.wide.u32 %rd2, %r1, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n\tld.global.f32 %f1, [%rd3];\n";
    let (r, arena) = run(&entry(body), 64, 100);
    let e = r.clone().unwrap_err().to_string();
    let (f, block, thread, line, instr) = fault(r);
    assert_eq!(
        f,
        Fault::OutOfBounds {
            space: "global",
            addr: arena + 100,
            size: 4
        }
    );
    assert_eq!((block, thread), ([0, 0, 0], [25, 0, 0]));
    assert_eq!((line, instr.as_str()), (15, "ld.global.f32 %f1, [%rd3];"));
    assert!(
        e.contains("`k` block [0, 0, 0] thread [25, 0, 0]: line 15"),
        "{e}"
    );
}

#[test]
fn out_of_bounds_global_store_past_a_buffer_and_below_the_first() {
    let body = "\tst.global.u64 [%rd1+96], %rd1;\n";
    let (f, ..) = fault(run(&entry(body), 1, 100).0);
    assert!(
        matches!(
            f,
            Fault::OutOfBounds {
                space: "global",
                size: 8,
                ..
            }
        ),
        "{f:?}"
    );
    let body = "\tmov.u64 %rd2, 0;\n\tld.global.u32 %r2, [%rd2+64];\n";
    let (f, ..) = fault(run(&entry(body), 1, 100).0);
    assert_eq!(
        f,
        Fault::OutOfBounds {
            space: "global",
            addr: 64,
            size: 4
        }
    );
}

#[test]
fn out_of_bounds_shared_store() {
    let body = "\tmov.u32 %r2, sdata;\n\tshl.b32 %r3, %r1, 2;\n\tadd.s32 %r2, %r2, %r3;\n\tst.shared.f32 [%r2], %f1;\n";
    let (f, _, thread, ..) = fault(run(&entry(body), 128, 0).0);
    assert_eq!(
        f,
        Fault::OutOfBounds {
            space: "shared",
            addr: 256,
            size: 4
        }
    );
    assert_eq!(thread, [64, 0, 0]);
}

#[test]
fn misaligned_accesses() {
    let body = "\tld.global.f32 %f1, [%rd1+2];\n";
    let (f, ..) = fault(run(&entry(body), 1, 64).0);
    assert!(
        matches!(
            f,
            Fault::Misaligned {
                space: "global",
                size: 4,
                ..
            }
        ),
        "{f:?}"
    );
    // A vector access must be aligned to its whole size.
    let body = "\tld.global.v4.f32 {%f0, %f1, %f2, %f3}, [%rd1+4];\n";
    let (f, ..) = fault(run(&entry(body), 1, 64).0);
    assert!(
        matches!(
            f,
            Fault::Misaligned {
                space: "global",
                size: 16,
                ..
            }
        ),
        "{f:?}"
    );
    let body = "\tst.shared.u16 [sdata+3], %r1;\n";
    let (f, ..) = fault(run(&entry(body), 1, 64).0);
    assert_eq!(
        f,
        Fault::Misaligned {
            space: "shared",
            addr: 3,
            size: 2
        }
    );
}

#[test]
fn deadlock_is_an_error() {
    // Lane 0 waits at a shuffle with lane 1, which waits at the block barrier; all others exit.
    let body = "\tsetp.gt.u32 %p1, %r1, 1;\n\t@%p1 bra $L_out;\n\tsetp.eq.u32 %p2, %r1, 1;\n\
                \t@%p2 bra $L_bar;\n\tshfl.sync.idx.b32 %r2, %r1, 0, 31, 3;\n\tbra.uni $L_out;\n\
                $L_bar:\n\tbar.sync 0;\n$L_out:\n";
    match run(&entry(body), 64, 0).0 {
        Err(Error::Deadlock {
            entry,
            block,
            detail,
        }) => {
            assert_eq!((entry.as_str(), block), ("k", [0, 0, 0]));
            assert!(
                detail.contains("bar.sync")
                    && detail.contains("shfl.sync")
                    && detail.contains("62 exited"),
                "{detail}"
            );
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn barrier_with_exited_threads_completes() {
    // Threads that exited do not hold up bar.sync.
    let body = "\tsetp.ge.u32 %p1, %r1, 40;\n\t@%p1 bra $L_out;\n\tbar.sync 0;\n$L_out:\n";
    assert_eq!(run(&entry(body), 64, 0).0, Ok(()));
}

#[test]
fn warp_sync_from_different_branches_completes() {
    // Like __syncwarp in both arms of an if: the lanes meet at different bar.warp.sync.
    let body = "\tand.b32 %r2, %r1, 1;\n\tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra $L_even;\n\tbar.warp.sync -1;\n\
                \tbra.uni $L_out;\n$L_even:\n\tbar.warp.sync -1;\n$L_out:\n";
    assert_eq!(run(&entry(body), 64, 0).0, Ok(()));
}

#[test]
fn membermask_lane_that_exited() {
    let body = "\tsetp.ge.u32 %p1, %r1, 16;\n\t@%p1 bra $L_out;\n\tshfl.sync.bfly.b32 %r2, %r1, 1, 31, -1;\n$L_out:\n";
    let (f, _, thread, ..) = fault(run(&entry(body), 32, 0).0);
    assert_eq!(
        f,
        Fault::ExitedLane {
            mask: u32::MAX,
            lane: 16
        }
    );
    assert_eq!(thread, [0, 0, 0]);
}

#[test]
fn membermask_rules() {
    // The mask must contain the executing lane.
    let body = "\tshfl.sync.bfly.b32 %r2, %r1, 1, 31, 2;\n";
    let (f, ..) = fault(run(&entry(body), 2, 0).0);
    assert_eq!(f, Fault::NotInMask { mask: 2, lane: 0 });
    // A mask naming lanes beyond a partial warp.
    let body = "\tbar.warp.sync -1;\n";
    let (f, ..) = fault(run(&entry(body), 8, 0).0);
    assert_eq!(
        f,
        Fault::MissingLane {
            mask: u32::MAX,
            lane: 8
        }
    );
    // A shuffle may not read a lane outside its mask.
    let body = "\tand.b32 %r3, %r1, 1;\n\tsetp.ne.u32 %p1, %r3, 0;\n\t@%p1 bra $L_out;\n\
                \tshfl.sync.bfly.b32 %r2, %r1, 1, 31, 0x5;\n$L_out:\n";
    let (f, ..) = fault(run(&entry(body), 3, 0).0);
    assert_eq!(f, Fault::ShflSource { mask: 5, src: 1 });
}

#[test]
fn endless_loop_hits_the_instruction_limit() {
    let text = entry("$L_spin:\n\tbra.uni $L_spin;\n");
    let mut m = Module::parse(&text).unwrap();
    m.set_instruction_limit(100_000);
    let mut mem = Memory::new();
    let l = Launch {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        shared_bytes: 0,
    };
    let (f, ..) = fault(m.launch("k", l, &[0, 0, 0], &mut mem).map(|_| ()));
    assert_eq!(f, Fault::InstructionLimit(100_000));
}

#[test]
fn parse_errors_name_the_line() {
    let cases = [
        (
            entry("\tfrobnicate.u32 %r1, %r2;\n"),
            13,
            "unsupported instruction `frobnicate.u32`",
        ),
        (
            entry("\tadd.u32 %r9, %r1, 1;\n"),
            13,
            "unknown register `%r9`",
        ),
        (
            entry("\tadd.rz.f32 %f1, %f2, %f3;\n"),
            13,
            "only the .rn rounding mode",
        ),
        (entry("\tcvt.s32.f32 %r1, %f1;\n"), 13, "rounding modifier"),
        (entry("\ttestp.nan.f32 %p1, %f1;\n"), 13, "testp.notanumber"),
        (
            entry("\tld.global.zz.f32 %f1, [%rd1];\n"),
            13,
            "unsupported modifier `.zz`",
        ),
        (entry("\tbra $L_nowhere;\n"), 13, "unknown label"),
        (
            entry("\tsetp.lt.b32 %p1, %r1, 0;\n"),
            13,
            "only with .eq or .ne",
        ),
        (
            format!("{HEADER}.global .f32 g[4];\n"),
            4,
            "unsupported module-level",
        ),
    ];
    for (text, line, msg) in cases {
        match Module::parse(&text) {
            Err(Error::Parse { line: l, message }) => {
                assert_eq!(l, line, "{message}");
                assert!(message.contains(msg), "{message}");
            }
            other => panic!("expected a parse error containing {msg:?}, got {other:?}"),
        }
    }
}

#[test]
fn launch_errors() {
    let m = Module::parse(&entry("")).unwrap();
    let mut mem = Memory::new();
    let l = Launch {
        grid: [1, 1, 1],
        block: [32, 1, 1],
        shared_bytes: 0,
    };
    assert_eq!(
        m.launch("nope", l, &[0, 0, 0], &mut mem).unwrap_err(),
        Error::UnknownEntry("nope".into())
    );
    assert!(matches!(
        m.launch("k", l, &[0, 0], &mut mem),
        Err(Error::Launch { .. })
    ));
    let big = Launch {
        block: [1025, 1, 1],
        ..l
    };
    assert!(matches!(
        m.launch("k", big, &[0, 0, 0], &mut mem),
        Err(Error::Launch { .. })
    ));
}

#[test]
fn comments_pragmas_and_debug_directives_are_accepted() {
    let text = format!(
        "//\n// Generated\n/* block\n comment */\n{HEADER}.file 1 \"x.cu\"\n\
         .visible .entry k(.param .u64 arena, .param .u32 n, .param .f32 s)\n.maxntid 64, 1, 1\n{{\n\
         \t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\t.reg .f32 %f<4>;\n\
         \t.loc 1 2 3\n\t.pragma \"nounroll\";\n\
         \tld.param.u64 %rd1, [arena]; // trailing comment\n\tld.param.u32 %r1, [n];\n\tld.param.f32 %f1, [s];\n\
         \tcvt.rn.f32.u32 %f2, %r1;\n\tmul.f32 %f2, %f2, %f1;\n\tst.global.f32 [%rd1], %f2;\n\tret;\n}}\n"
    );
    let m = Module::parse(&text).unwrap();
    let mut mem = Memory::new();
    let arena = mem.add(vec![0; 4]);
    let l = Launch {
        grid: [1, 1, 1],
        block: [1, 1, 1],
        shared_bytes: 0,
    };
    m.launch("k", l, &[arena, 7, u64::from(1.5f32.to_bits())], &mut mem)
        .unwrap();
    assert_eq!(mem.take(arena), 10.5f32.to_le_bytes());
    let too_many = Launch {
        block: [65, 1, 1],
        ..l
    };
    assert!(matches!(
        m.launch("k", too_many, &[arena, 7, 0], &mut mem),
        Err(Error::Launch { .. })
    ));
}

/// Thread t stores sdata[4t], then `sync`, then loads sdata[4((t + 1) % n)].
fn neighbour_exchange(sync: &str) -> String {
    entry(&format!(
        "\tmov.u32 %r2, sdata;\n\tshl.b32 %r3, %r1, 2;\n\tadd.s32 %r4, %r2, %r3;\n\tst.shared.u32 [%r4], %r1;\n{sync}\
         \tadd.s32 %r5, %r1, 1;\n\trem.u32 %r5, %r5, %r6;\n\tshl.b32 %r5, %r5, 2;\n\tadd.s32 %r5, %r2, %r5;\n\
         \tld.shared.u32 %r7, [%r5];\n"
    ))
    .replace("\tmov.u32 %r1, %tid.x;\n", "\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r6, %ntid.x;\n")
}

#[test]
fn shared_memory_races() {
    // Without a barrier, thread 0 reads sdata[1] before thread 1 writes it.
    let (f, _, thread, ..) = fault(run(&neighbour_exchange(""), 16, 0).0);
    assert_eq!(thread, [1, 0, 0]);
    assert_eq!(
        f,
        Fault::SharedRace {
            offset: 4,
            other: 0,
            kind: "write after a read by"
        }
    );
    // A warp-level sync orders the lanes of one warp, but not two warps.
    assert_eq!(
        run(&neighbour_exchange("\tbar.warp.sync -1;\n"), 32, 0).0,
        Ok(())
    );
    let (f, _, thread, ..) = fault(run(&neighbour_exchange("\tbar.warp.sync -1;\n"), 64, 0).0);
    assert_eq!(thread, [31, 0, 0]);
    assert_eq!(
        f,
        Fault::SharedRace {
            offset: 128,
            other: 32,
            kind: "read after a write by"
        }
    );
    // bar.sync orders the whole block.
    assert_eq!(run(&neighbour_exchange("\tbar.sync 0;\n"), 64, 0).0, Ok(()));
    // With the race detector off the racy kernel runs.
    let mut m = Module::parse(&neighbour_exchange("")).unwrap();
    m.set_race_detection(false);
    let mut mem = Memory::new();
    let l = Launch {
        grid: [1, 1, 1],
        block: [16, 1, 1],
        shared_bytes: 0,
    };
    assert!(m.launch("k", l, &[0, 0, 0], &mut mem).is_ok());
}
