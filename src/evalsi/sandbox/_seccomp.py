"""The seccomp allow-list every namespaced or confined execution runs under.

Why an allow-list with ``ERRNO(EPERM)`` as the default, not ``KILL_PROCESS``: programs and
runtimes probe syscalls they can live without (``rseq``, ``statx`` fallbacks, new syscalls a
future libc tries first); an EPERM makes them fall back, a kill would turn a harmless probe
into a crash. The syscalls that only an attack needs (ptrace, keyctl, io_uring, mount, bpf,
kexec, module loading, namespace creation, TIOCSTI/TIOCLINUX) are listed explicitly with
``KILL_PROCESS``, so using them is a visible denial (SIGSYS → ``denied("seccomp")``), not a
silent error. ``clone3`` answers ENOSYS (its flags sit behind a pointer seccomp cannot read;
glibc then falls back to ``clone``, whose flags are checked). The filter holds the native
architecture only and kills on any other (32-bit ``int 0x80`` calls die; libseccomp's x86_64
filter also rejects the x32 syscall range). ``socket`` is allowed for AF_UNIX only when the
network is denied (AF_INET/AF_INET6 → EPERM; the network namespace already has only ``lo``).

The confined rung (no network, mount or IPC namespace) asks for a narrower variant:
``unix_sockets=False`` answers EPERM to ``socket(AF_UNIX, ...)`` too (pathname sockets of the
host would be reachable by permission alone; ``socketpair`` stays), ``ipc=False`` answers EPERM
to SysV IPC and POSIX message queues (the host's segments, semaphores and queues).
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile
from typing import Literal

# Allowed unconditionally: what CPython, coreutils, a shell and compilers need.
# fmt: off
_ALLOW = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev", "preadv2",
    "pwritev2", "open", "openat", "openat2", "close", "close_range", "creat", "lseek", "stat",
    "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "access", "faccessat",
    "faccessat2", "readlink", "readlinkat", "getdents", "getdents64", "getcwd", "chdir", "fchdir",
    "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link",
    "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
    "fchownat", "truncate", "ftruncate", "utime", "utimes", "utimensat", "futimesat", "fsync",
    "fdatasync", "sync", "syncfs", "sync_file_range", "fallocate", "fadvise64", "flock", "fcntl",
    "dup", "dup2", "dup3", "pipe", "pipe2", "poll", "ppoll", "select", "pselect6", "epoll_create",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
    "eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime", "timerfd_gettime",
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "mmap", "munmap",
    "mprotect", "mremap", "madvise", "msync", "mincore", "brk", "mlock", "munlock", "membarrier",
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
    "rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "sigaltstack", "kill", "tkill",
    "tgkill", "pause", "nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
    "gettimeofday", "time", "getitimer", "setitimer", "alarm", "timer_create", "timer_settime",
    "timer_gettime", "timer_getoverrun", "timer_delete", "times", "getrusage", "sysinfo", "uname",
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "getpgid", "getpgrp", "getsid", "setpgid", "setsid",
    "set_tid_address", "set_robust_list", "get_robust_list", "futex", "futex_waitv", "rseq",
    "arch_prctl", "prctl", "getrlimit", "prlimit64", "setrlimit", "getpriority", "setpriority",
    "sched_yield", "sched_getaffinity", "sched_setaffinity", "sched_getparam",
    "sched_getscheduler", "sched_get_priority_max", "sched_get_priority_min",
    "sched_rr_get_interval", "getrandom", "getcpu", "pidfd_open", "pidfd_send_signal",
    "memfd_create", "execve", "execveat", "fork", "vfork", "wait4", "waitid", "exit", "exit_group",
    "umask", "sendfile", "copy_file_range", "splice", "tee", "vmsplice", "capget", "socketpair",
    "connect", "accept", "accept4", "bind", "listen", "getsockname", "getpeername", "sendto",
    "recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg", "shutdown", "setsockopt",
    "getsockopt", "name_to_handle_at", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
    "llistxattr", "flistxattr", "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive",
    "mq_notify", "mq_getsetattr", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop",
    "semtimedop", "semctl", "msgget", "msgsnd", "msgrcv", "msgctl",
)
# fmt: on
# Left out of the allow-list (EPERM) with ``ipc=False``: they reach the IPC namespace's objects.
# fmt: off
_IPC = frozenset((
    "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
    "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop", "semctl", "msgget",
    "msgsnd", "msgrcv", "msgctl",
))
# fmt: on

# Killed: only an escape or an attack on the host needs these.
# fmt: off
_KILL = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "mount", "umount2", "pivot_root",
    "chroot", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "init_module",
    "finit_module", "delete_module", "unshare", "setns", "userfaultfd", "reboot", "swapon",
    "swapoff", "acct", "quotactl", "iopl", "ioperm", "syslog", "lookup_dcookie",
    "open_by_handle_at", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
)
# fmt: on

CLONE_NS_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
_NS_MASK = functools.reduce(lambda a, b: a | b, CLONE_NS_FLAGS.values())
TIOCSTI = 0x5412
TIOCLINUX = 0x541C
# The ioctls a program on pipes and regular files uses; others answer EPERM.
_IOCTLS = (
    0x5401, 0x5402, 0x5403, 0x5404,  # TCGETS (isatty), TCSETS, TCSETSW, TCSETSF
    0x540F, 0x5410, 0x5413, 0x5414,  # TIOCGPGRP, TIOCSPGRP, TIOCGWINSZ, TIOCSWINSZ
    0x541B, 0x5421, 0x5450, 0x5451, 0x5452,  # FIONREAD, FIONBIO, FIONCLEX, FIOCLEX, FIOASYNC
)  # fmt: skip
_LOW32 = 0xFFFFFFFF  # the kernel reads ioctl's cmd and socket's family as 32-bit ints
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10

NetworkMode = Literal["deny", "loopback"]


class SeccompUnavailable(RuntimeError):
    """The filter could not be built (pyseccomp or libseccomp missing or failing)."""


@functools.cache
def filter_bpf(network: NetworkMode, *, unix_sockets: bool = True, ipc: bool = True) -> bytes:
    """The compiled BPF program for this network mode, built once per variant and process.

    ``unix_sockets=False``: ``socket(AF_UNIX, ...)`` answers EPERM; ``ipc=False``: SysV IPC and
    POSIX message queues answer EPERM (both for a rung that shares the host's namespaces)."""
    try:
        import pyseccomp as sc  # type: ignore[import-untyped]
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so missing
        raise SeccompUnavailable(
            f"pyseccomp is not usable ({exc}): pip install 'evalsi[sandbox]'"
        ) from exc
    try:
        flt = sc.SyscallFilter(sc.ERRNO(errno.EPERM))
        flt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
        for name in _ALLOW:
            if ipc or name not in _IPC:  # left out: the default action, EPERM
                _add(sc, flt, sc.ALLOW, name)
        for name in _KILL:
            _add(sc, flt, sc.KILL_PROCESS, name)
        flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        flt.add_rule(sc.ALLOW, "clone", sc.Arg(0, sc.MASKED_EQ, _NS_MASK, 0))
        for flag in CLONE_NS_FLAGS.values():
            flt.add_rule(sc.KILL_PROCESS, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        for cmd in _IOCTLS:
            flt.add_rule(sc.ALLOW, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, cmd))
        for cmd in (TIOCSTI, TIOCLINUX):
            flt.add_rule(sc.KILL_PROCESS, "ioctl", sc.Arg(1, sc.MASKED_EQ, _LOW32, cmd))
        families = (_AF_UNIX,) if network == "deny" else (_AF_UNIX, _AF_INET, _AF_INET6)
        for family in families if unix_sockets else families[1:]:
            flt.add_rule(sc.ALLOW, "socket", sc.Arg(0, sc.MASKED_EQ, _LOW32, family))
        with tempfile.TemporaryFile() as out:
            flt.export_bpf(out)
            out.seek(0)
            return out.read()
    except OSError as exc:
        raise SeccompUnavailable(f"seccomp filter could not be built: {exc}") from exc


def _add(sc: object, flt: object, action: int, name: str) -> None:
    """Add one rule, skipping a syscall this architecture does not have (e.g. ``open`` on
    arm64): libseccomp reports those as unresolvable."""
    try:
        flt.add_rule(action, name)  # type: ignore[attr-defined]
    except (ValueError, OSError) as exc:
        if sc.resolve_syscall(sc.system_arch(), name) < 0:  # type: ignore[attr-defined]
            return
        raise SeccompUnavailable(f"seccomp rule for {name} failed: {exc}") from exc


def filter_fd(network: NetworkMode) -> int:
    """A readable fd holding the BPF program (a memfd at offset 0), for ``bwrap --seccomp``.

    The caller passes it to the child and closes it afterwards; bwrap reads it to the end."""
    bpf = filter_bpf(network)
    fd = os.memfd_create("evalsi-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, bpf)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
