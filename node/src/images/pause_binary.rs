//! A pause program for x86_64 Linux, emitted as a static ELF executable of a
//! few hundred bytes, so the sandbox image needs neither a compiler nor a
//! registry. It does what a pod's infrastructure container must: block until
//! told to stop, exit 0 on SIGTERM or SIGINT, and reap zombies on SIGCHLD
//! (it is PID 1 of pods that share a process namespace).
//!
//! The machine code is assembled below instruction by instruction; the
//! tests run the result.

/// Load address of the single segment.
const BASE: u64 = 0x40_0000;
/// ELF header (64 bytes) plus one program header (56 bytes).
const HEADERS: usize = 64 + 56;

const SYS_RT_SIGACTION: u32 = 13;
const SYS_RT_SIGRETURN: u32 = 15;
const SYS_PAUSE: u32 = 34;
const SYS_WAIT4: u32 = 61;
const SYS_EXIT_GROUP: u32 = 231;
const SIGINT: u32 = 2;
const SIGTERM: u32 = 15;
const SIGCHLD: u32 = 17;
const SA_NOCLDSTOP: u64 = 0x1;
const SA_RESTORER: u64 = 0x0400_0000;
const SA_RESTART: u64 = 0x1000_0000;
const WNOHANG: u32 = 1;

/// A tiny assembler for the handful of instructions used.
#[derive(Default)]
struct Code {
    bytes: Vec<u8>,
    /// (position of a rip-relative disp32, index of the data block it names)
    data_refs: Vec<(usize, usize)>,
}

impl Code {
    fn here(&self) -> usize {
        self.bytes.len()
    }
    fn mov_eax(&mut self, v: u32) {
        self.bytes.push(0xb8);
        self.bytes.extend(v.to_le_bytes());
    }
    fn mov_edi(&mut self, v: u32) {
        self.bytes.push(0xbf);
        self.bytes.extend(v.to_le_bytes());
    }
    fn mov_edx(&mut self, v: u32) {
        self.bytes.push(0xba);
        self.bytes.extend(v.to_le_bytes());
    }
    fn mov_r10d(&mut self, v: u32) {
        self.bytes.extend([0x41, 0xba]);
        self.bytes.extend(v.to_le_bytes());
    }
    fn xor_esi(&mut self) {
        self.bytes.extend([0x31, 0xf6]);
    }
    fn xor_edx(&mut self) {
        self.bytes.extend([0x31, 0xd2]);
    }
    fn xor_edi(&mut self) {
        self.bytes.extend([0x31, 0xff]);
    }
    fn xor_r10d(&mut self) {
        self.bytes.extend([0x45, 0x31, 0xd2]);
    }
    /// `lea rsi, [rip + data block]`, patched once the data is placed.
    fn lea_rsi_data(&mut self, block: usize) {
        self.bytes.extend([0x48, 0x8d, 0x35]);
        self.data_refs.push((self.here(), block));
        self.bytes.extend([0; 4]);
    }
    fn syscall(&mut self) {
        self.bytes.extend([0x0f, 0x05]);
    }
    fn test_rax(&mut self) {
        self.bytes.extend([0x48, 0x85, 0xc0]);
    }
    /// Short jump (`op` is 0xeb for jmp, 0x7f for jg) back to `target`.
    fn jump_back(&mut self, op: u8, target: usize) {
        let after = self.here() + 2;
        let rel = i8::try_from(target as isize - after as isize).unwrap_or(0);
        self.bytes.extend([op, rel.to_le_bytes()[0]]);
    }
    fn ret(&mut self) {
        self.bytes.push(0xc3);
    }
}

/// The pause executable.
pub fn pause_elf() -> Vec<u8> {
    let mut c = Code::default();
    // Install handlers: data block 0 is the exit action, 1 the reap action.
    for (signal, block) in [(SIGTERM, 0), (SIGINT, 0), (SIGCHLD, 1)] {
        c.mov_eax(SYS_RT_SIGACTION);
        c.mov_edi(signal);
        c.lea_rsi_data(block);
        c.xor_edx();
        c.mov_r10d(8); // sizeof(kernel sigset_t)
        c.syscall();
    }
    // Sleep until a signal arrives, forever.
    let idle = c.here();
    c.mov_eax(SYS_PAUSE);
    c.syscall();
    c.jump_back(0xeb, idle);

    // SIGTERM / SIGINT: exit_group(0).
    let on_exit = c.here();
    c.mov_eax(SYS_EXIT_GROUP);
    c.xor_edi();
    c.syscall();

    // SIGCHLD: wait4(-1, NULL, WNOHANG, NULL) while it returns a child.
    let on_child = c.here();
    c.mov_eax(SYS_WAIT4);
    c.mov_edi(u32::MAX); // pid -1: any child
    c.xor_esi();
    c.mov_edx(WNOHANG);
    c.xor_r10d();
    c.syscall();
    c.test_rax();
    c.jump_back(0x7f, on_child);
    c.ret(); // into the restorer below

    // Return path of handlers (SA_RESTORER is mandatory on x86_64).
    let restorer = c.here();
    c.mov_eax(SYS_RT_SIGRETURN);
    c.syscall();

    // Data: two `struct kernel_sigaction` {handler, flags, restorer, mask},
    // 8-byte aligned.
    while !(HEADERS + c.here()).is_multiple_of(8) {
        c.bytes.push(0x90);
    }
    let addr = |offset: usize| BASE + (HEADERS + offset) as u64;
    let mut blocks = Vec::new();
    for (handler, flags) in [
        (on_exit, SA_RESTORER),
        (on_child, SA_RESTORER | SA_RESTART | SA_NOCLDSTOP),
    ] {
        blocks.push(c.here());
        for word in [addr(handler), flags, addr(restorer), 0] {
            c.bytes.extend(word.to_le_bytes());
        }
    }
    for (at, block) in std::mem::take(&mut c.data_refs) {
        let disp = blocks[block] as i64 - (at as i64 + 4);
        let disp = i32::try_from(disp).unwrap_or(0);
        c.bytes[at..at + 4].copy_from_slice(&disp.to_le_bytes());
    }

    let total = (HEADERS + c.here()) as u64;
    let mut elf = Vec::with_capacity(HEADERS + c.here());
    // ELF header.
    elf.extend([0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    elf.extend(2u16.to_le_bytes()); // ET_EXEC
    elf.extend(0x3eu16.to_le_bytes()); // EM_X86_64
    elf.extend(1u32.to_le_bytes()); // EV_CURRENT
    elf.extend(addr(0).to_le_bytes()); // entry
    elf.extend(64u64.to_le_bytes()); // program headers follow
    elf.extend(0u64.to_le_bytes()); // no section headers
    elf.extend(0u32.to_le_bytes()); // flags
    elf.extend(64u16.to_le_bytes()); // header size
    elf.extend(56u16.to_le_bytes()); // program header size
    elf.extend(1u16.to_le_bytes()); // one program header
    elf.extend(64u16.to_le_bytes()); // section header size
    elf.extend(0u16.to_le_bytes()); // no sections
    elf.extend(0u16.to_le_bytes()); // no section names
    // Program header: the whole file, read + execute, at BASE.
    elf.extend(1u32.to_le_bytes()); // PT_LOAD
    elf.extend(5u32.to_le_bytes()); // PF_R | PF_X
    elf.extend(0u64.to_le_bytes()); // offset
    elf.extend(BASE.to_le_bytes()); // vaddr
    elf.extend(BASE.to_le_bytes()); // paddr
    elf.extend(total.to_le_bytes()); // file size
    elf.extend(total.to_le_bytes()); // memory size
    elf.extend(0x1000u64.to_le_bytes()); // alignment
    elf.extend(c.bytes);
    elf
}

#[cfg(test)]
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Child, Command};
    use std::time::{Duration, Instant};

    fn spawn_pause(dir: &std::path::Path) -> Child {
        let path = dir.join("pause");
        skiff_testkit::write_executable(&path, pause_elf());
        Command::new(&path).spawn().unwrap()
    }

    fn signal(child: &Child, sig: libc::c_int) {
        // SAFETY: kill(2) has no memory-safety preconditions.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, sig) }, 0);
    }

    fn wait(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn it_is_a_small_static_executable() {
        let elf = pause_elf();
        assert_eq!(&elf[..4], b"\x7fELF");
        assert!(elf.len() < 512, "{} bytes", elf.len());
    }

    #[test]
    fn it_waits_survives_sigchld_and_exits_0_on_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = spawn_pause(dir.path());
        assert!(
            wait(&mut child, Duration::from_millis(200)).is_none(),
            "exited on its own"
        );
        signal(&child, libc::SIGCHLD);
        assert!(
            wait(&mut child, Duration::from_millis(200)).is_none(),
            "SIGCHLD ended it"
        );
        signal(&child, libc::SIGTERM);
        let status = wait(&mut child, Duration::from_secs(5)).expect("exits on SIGTERM");
        assert_eq!((status.code(), status.signal()), (Some(0), None));
    }

    #[test]
    fn it_exits_0_on_sigint() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = spawn_pause(dir.path());
        assert!(wait(&mut child, Duration::from_millis(100)).is_none());
        signal(&child, libc::SIGINT);
        let status = wait(&mut child, Duration::from_secs(5)).expect("exits on SIGINT");
        assert_eq!(status.code(), Some(0));
    }
}
