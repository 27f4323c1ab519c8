//! The seccomp filter of the CPython sandbox, as the classic BPF program
//! bubblewrap loads (`bwrap --seccomp FD`).
//!
//! It refuses what a Python worker never needs and an escape would: new
//! processes (`fork`, `vfork`, `clone` without `CLONE_THREAD`; threads stay
//! allowed, numpy uses them), `clone3` (answered `ENOSYS`, so the C library
//! falls back to `clone`, whose flags the filter can read), new namespaces
//! (`unshare`, `setns`), mounts, `ptrace` and reading other processes' memory,
//! kernel keyrings, `bpf`, `perf_event_open`, `userfaultfd`, `io_uring` and
//! kernel modules. Everything else is allowed: the namespaces and the
//! read-only mounts are what keep the files and the network out. A call
//! made under another architecture's ABI (x32 on x86-64, any foreign
//! architecture) kills the process.
//!
//! Written out here (about 30 instructions) rather than through libseccomp,
//! which would add a C library to the build.

/// `struct sock_filter` as the kernel reads it: 8 bytes, native endian.
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const RET_K: u16 = 0x06; // BPF_RET | BPF_K

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const EPERM: u32 = 1;
const ENOSYS: u32 = 38;
const CLONE_THREAD: u32 = 0x0001_0000;

/// Offsets in `struct seccomp_data`.
const DATA_NR: u32 = 0;
const DATA_ARCH: u32 = 4;
/// The low 32 bits of the first argument (little-endian machines).
const DATA_ARG0_LOW: u32 = 16;

/// The syscall numbers and audit architecture of one machine.
struct Arch {
    audit: u32,
    /// Numbers at or above this are a second ABI (x32): refused.
    foreign_abi_from: Option<u32>,
    clone: u32,
    clone3: u32,
    /// Refused with `EPERM`.
    denied: &'static [u32],
}

#[cfg(target_arch = "x86_64")]
static ARCH: Option<Arch> = Some(Arch {
    audit: 0xC000_003E,
    foreign_abi_from: Some(0x4000_0000),
    clone: 56,
    clone3: 435,
    denied: &[
        57,  // fork
        58,  // vfork
        101, // ptrace
        310, // process_vm_readv
        311, // process_vm_writev
        272, // unshare
        308, // setns
        165, // mount
        166, // umount2
        155, // pivot_root
        161, // chroot
        248, // add_key
        249, // request_key
        250, // keyctl
        321, // bpf
        298, // perf_event_open
        323, // userfaultfd
        425, // io_uring_setup
        426, // io_uring_enter
        427, // io_uring_register
        246, // kexec_load
        320, // kexec_file_load
        175, // init_module
        313, // finit_module
        176, // delete_module
        428, // open_tree
        429, // move_mount
        430, // fsopen
        432, // fsmount
    ],
});

#[cfg(target_arch = "aarch64")]
static ARCH: Option<Arch> = Some(Arch {
    audit: 0xC000_00B7,
    foreign_abi_from: None,
    clone: 220,
    clone3: 435,
    denied: &[
        117, // ptrace
        270, // process_vm_readv
        271, // process_vm_writev
        97,  // unshare
        268, // setns
        40,  // mount
        39,  // umount2
        41,  // pivot_root
        51,  // chroot
        217, // add_key
        218, // request_key
        219, // keyctl
        280, // bpf
        241, // perf_event_open
        282, // userfaultfd
        425, // io_uring_setup
        426, // io_uring_enter
        427, // io_uring_register
        104, // kexec_load
        294, // kexec_file_load
        105, // init_module
        273, // finit_module
        106, // delete_module
        428, // open_tree
        429, // move_mount
        430, // fsopen
        432, // fsmount
    ],
});

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
static ARCH: Option<Arch> = None;

/// The filter as the bytes `bwrap --seccomp` reads, or `None` on a machine
/// whose syscall table is not written out here (the sandbox then runs
/// without it, which [`super::CPythonLauncher::describe`] says).
pub(crate) fn filter_program() -> Option<Vec<u8>> {
    let arch = ARCH.as_ref()?;
    Some(encode(&program(arch)))
}

/// Builds the program. Jumps are relative and only forward (the next
/// instruction is 0), so the exits and the clone check are placed after
/// every test.
fn program(arch: &Arch) -> Vec<Insn> {
    // Layout: header, one test per syscall, then the tail:
    //   tail+0: ret ALLOW (no test matched)
    //   tail+1: ld arg0; tail+2: jset CLONE_THREAD → tail+3 else tail+4
    //   tail+3: ret ALLOW
    //   tail+4: ret ERRNO(EPERM)
    //   tail+5: ret ERRNO(ENOSYS)
    //   tail+6: ret KILL_PROCESS
    let mut tests: Vec<(u16, u32, Target)> = Vec::new();
    if let Some(from) = arch.foreign_abi_from {
        tests.push((JGE_K, from, Target::Kill));
    }
    tests.push((JEQ_K, arch.clone3, Target::Enosys));
    tests.push((JEQ_K, arch.clone, Target::CloneCheck));
    for &nr in arch.denied {
        tests.push((JEQ_K, nr, Target::Deny));
    }
    let header = 3; // ld arch; jeq arch else kill; ld nr
    let tail = header + tests.len();
    let at = |t: Target| -> usize {
        match t {
            Target::CloneCheck => tail + 1,
            Target::Allow => tail + 3,
            Target::Deny => tail + 4,
            Target::Enosys => tail + 5,
            Target::Kill => tail + 6,
        }
    };
    let jump = |from: usize, to: usize| -> u8 {
        u8::try_from(to - from - 1).expect("the filter is short enough for 8-bit jumps")
    };
    let mut p = Vec::with_capacity(tail + 7);
    p.push(insn(LD_W_ABS, 0, 0, DATA_ARCH));
    p.push(insn(JEQ_K, 0, jump(1, at(Target::Kill)), arch.audit));
    p.push(insn(LD_W_ABS, 0, 0, DATA_NR));
    for (i, (code, k, target)) in tests.into_iter().enumerate() {
        let here = header + i;
        p.push(insn(code, jump(here, at(target)), 0, k));
    }
    p.push(insn(RET_K, 0, 0, RET_ALLOW));
    p.push(insn(LD_W_ABS, 0, 0, DATA_ARG0_LOW));
    let jset = tail + 2;
    p.push(insn(
        JSET_K,
        jump(jset, at(Target::Allow)),
        jump(jset, at(Target::Deny)),
        CLONE_THREAD,
    ));
    p.push(insn(RET_K, 0, 0, RET_ALLOW));
    p.push(insn(RET_K, 0, 0, RET_ERRNO | EPERM));
    p.push(insn(RET_K, 0, 0, RET_ERRNO | ENOSYS));
    p.push(insn(RET_K, 0, 0, RET_KILL_PROCESS));
    p
}

#[derive(Debug, Clone, Copy)]
enum Target {
    Allow,
    Deny,
    Enosys,
    CloneCheck,
    Kill,
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

fn encode(program: &[Insn]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for i in program {
        bytes.extend_from_slice(&i.code.to_ne_bytes());
        bytes.push(i.jt);
        bytes.push(i.jf);
        bytes.extend_from_slice(&i.k.to_ne_bytes());
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program on a `seccomp_data` the way the kernel does, for the
    /// few instructions the filter uses.
    fn run(program: &[Insn], nr: u32, arch: u32, arg0: u32) -> u32 {
        let load = |off: u32| match off {
            DATA_NR => nr,
            DATA_ARCH => arch,
            DATA_ARG0_LOW => arg0,
            other => panic!("unexpected load at {other}"),
        };
        let (mut pc, mut acc) = (0usize, 0u32);
        loop {
            let i = program[pc];
            match i.code {
                LD_W_ABS => acc = load(i.k),
                RET_K => return i.k,
                JEQ_K | JGE_K | JSET_K => {
                    let taken = match i.code {
                        JEQ_K => acc == i.k,
                        JGE_K => acc >= i.k,
                        _ => acc & i.k != 0,
                    };
                    pc += usize::from(if taken { i.jt } else { i.jf });
                }
                other => panic!("unexpected opcode {other:#x}"),
            }
            pc += 1;
        }
    }

    #[test]
    fn the_filter_allows_threads_and_refuses_processes() {
        let Some(arch) = ARCH.as_ref() else { return };
        let p = program(arch);
        let a = arch.audit;
        assert_eq!(run(&p, 0, a, 0), RET_ALLOW, "read");
        assert_eq!(run(&p, arch.clone, a, CLONE_THREAD | 0x100), RET_ALLOW);
        assert_eq!(
            run(&p, arch.clone, a, 0x11),
            RET_ERRNO | EPERM,
            "fork via clone"
        );
        assert_eq!(run(&p, arch.clone3, a, 0), RET_ERRNO | ENOSYS);
        for &nr in arch.denied {
            assert_eq!(run(&p, nr, a, 0), RET_ERRNO | EPERM, "syscall {nr}");
        }
        assert_eq!(run(&p, 0, 0x1234, 0), RET_KILL_PROCESS, "foreign arch");
        if let Some(from) = arch.foreign_abi_from {
            assert_eq!(run(&p, from + 1, a, 0), RET_KILL_PROCESS, "x32");
        }
        assert_eq!(filter_program().map(|b| b.len()), Some(p.len() * 8));
    }
}
