"""The ``landlock`` rung's launcher: confines itself and a child, then execs the program.

It runs as ``python -I -S -c <this file's source> CONFIG_FD REPORT_FD`` under the pool uid, so
it imports the standard library only (no site-packages, no evalsi). ``CONFIG_FD`` holds one
dict in ``marshal`` format (argv, env, cwd, Landlock rules, rlimits, the seccomp BPF
program; marshal, not JSON: importing ``json`` pulls in ``re`` and costs ~10 ms); ``REPORT_FD``
is the launcher's own pipe to the driver: ``error <stage>: <why>`` for a failure before the
program could start, else ``status exit N`` / ``status signal N`` once it ended. The program
never holds that pipe (close-on-exec), so it cannot forge either line.

Two processes, two Landlock layers:

- the launcher moves itself into the sandbox's cgroups (when the driver made them; failing
  to is an error, never a run without them), restricts itself with a signal scope only,
  becomes the child subreaper and forks; it then waits for the program, kills whatever the
  program left behind with ``kill(-1, SIGKILL)`` (the scope limits that to its own domain:
  the program and its descendants, never a host process) and reaps every orphan, so no
  zombie keeps counting against the pool uid's RLIMIT_NPROC (the host's init here does not
  reap);
- the child raises its OOM score (in a memory cgroup the program, not the launcher, is the
  one to die), adds the full layer (file hierarchies, TCP, abstract-unix and signal scopes,
  chosen entries of its own ``/proc/<pid>``) in a nested domain, which therefore cannot
  signal the launcher, then sets the rlimits, closes every fd above 2, loads the seccomp
  filter and execs the program.

Every step before ``execve`` that fails is reported and ends the child with status 125: a
failure never falls through to running the program with less confinement.
"""

from __future__ import annotations

import ctypes
import errno
import marshal
import os
import resource
import signal
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: every millisecond of startup counts
    from typing import Any

# Syscall numbers: Landlock's are the same on every architecture (added after the unified
# syscall table), 444..446.
SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1

# Filesystem rights, bit by bit in the UAPI's order (ABI 1, but REFER: 2, TRUNCATE: 3,
# IOCTL_DEV: 5).
(
    FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR, FS_REMOVE_DIR, FS_REMOVE_FILE,
    FS_MAKE_CHAR, FS_MAKE_DIR, FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK,
    FS_MAKE_SYM, FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV,
) = (1 << bit for bit in range(16))  # fmt: skip
FS_ALL = (1 << 16) - 1
# The only rights a rule on a non-directory may carry (the kernel refuses others).
FS_FILE_RIGHTS = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

MIN_ABI_TCP, MIN_ABI_SCOPES = 4, 6
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 1, 22, 36, 38
SECCOMP_MODE_FILTER = 2
BPF_MAXINSNS = 4096
SIGKILL = 9
CHILD_FAILED = 125  # the child's status when it reported an error before exec


class LaunchError(Exception):
    """A confinement step failed; ``stage`` names it in the report."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # packed in the UAPI header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]


def _syscall(number: int, *args: object) -> int:
    return int(_libc.syscall(ctypes.c_long(number), *args))


def _errno_text() -> str:
    err = ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; raises ``OSError`` when Landlock is missing
    (ENOSYS: not built in) or disabled (EOPNOTSUPP: not in the ``lsm=`` list)."""
    version = ctypes.c_uint32(CREATE_RULESET_VERSION)
    abi = _syscall(SYS_CREATE_RULESET, ctypes.c_void_p(None), ctypes.c_size_t(0), version)
    if abi < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return abi


def abi_refusal(abi: int) -> str | None:
    """Why ``abi`` is too old for this rung, or None. Nothing is ever enforced partially."""
    if abi < MIN_ABI_TCP:
        return f"Landlock ABI {abi} < {MIN_ABI_TCP}: no TCP rules; refused"
    if abi < MIN_ABI_SCOPES:
        return f"Landlock ABI {abi} < {MIN_ABI_SCOPES}: no abstract-unix/signal scoping; refused"
    return None


def checked_abi(override: int | None) -> int:
    """The ABI to build against (``override`` only ever lowers it: tests simulate old
    kernels), refusing one below what this rung needs."""
    try:
        abi = landlock_abi()
    except OSError as exc:
        raise LaunchError("landlock", f"Landlock not supported/disabled: {exc.strerror}") from exc
    if override is not None:
        abi = min(abi, override)
    refusal = abi_refusal(abi)
    if refusal is not None:
        raise LaunchError("landlock", refusal)
    return abi


def create_ruleset(handled_fs: int, handled_net: int, scoped: int) -> int:
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    size = ctypes.c_size_t(ctypes.sizeof(attr))
    fd = _syscall(SYS_CREATE_RULESET, ctypes.byref(attr), size, ctypes.c_uint32(0))
    if fd < 0:
        raise LaunchError("landlock", f"create_ruleset failed: {_errno_text()}")
    return fd


def add_path_rule(ruleset: int, path: str, access: int, handled_fs: int, required: bool) -> None:
    """Allow ``access`` beneath ``path`` (only file rights when it is not a directory). A
    missing optional path (a system dir this host lacks) is skipped; a required one fails."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if not required and exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return
        raise LaunchError("landlock", f"cannot open {path!r}: {exc.strerror}") from exc
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            access &= FS_FILE_RIGHTS
        attr = _PathBeneathAttr(access & handled_fs, fd)
        rule = (ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(attr), ctypes.c_uint32(0))
        rc = _syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), *rule)
        if rc < 0:
            raise LaunchError("landlock", f"add_rule {path!r} failed: {_errno_text()}")
    finally:
        os.close(fd)


def restrict_self(ruleset: int) -> None:
    rc = _syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    if rc < 0:
        raise LaunchError("landlock", f"restrict_self failed: {_errno_text()}")


def prctl(option: int, arg: int, stage: str) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        raise LaunchError(stage, f"prctl({option}) failed: {_errno_text()}")


def load_seccomp(bpf: bytes) -> None:
    """Install ``bpf`` (a ``struct sock_filter[]``, 8 bytes per instruction)."""
    count, rest = divmod(len(bpf), 8)
    if rest or not 0 < count <= BPF_MAXINSNS:
        raise LaunchError("seccomp", f"malformed BPF program ({len(bpf)} bytes)")
    buf = ctypes.create_string_buffer(bpf, len(bpf))
    prog = _SockFprog(count, ctypes.cast(buf, ctypes.c_void_p))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        raise LaunchError("seccomp", f"loading the filter failed: {_errno_text()}")


def join_cgroups(procs: list[str] | tuple[str, ...]) -> None:
    """Write this process's pid into each ``cgroup.procs`` file; any failure is fatal (the
    program never runs without the totals the driver reported)."""
    pid = str(os.getpid()).encode()
    for path in procs:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        except OSError as exc:
            raise LaunchError("cgroup", f"cannot join {path!r}: {exc.strerror}") from exc


def _report(fd: int, line: str) -> None:
    data = (line.replace("\n", " ") + "\n").encode(errors="replace")
    try:  # noqa: SIM105 - contextlib is not imported: launcher startup time
        os.write(fd, data)
    except OSError:
        pass  # the driver is gone; nothing left to tell


def _confine_child(cfg: dict[str, Any], report_fd: int) -> None:
    """Everything between fork and exec; raises LaunchError on the first failing step."""
    if cfg.get("oom_score_adj") is not None:
        # In a memory cgroup the OOM killer should pick the program, not the launcher that
        # reports its status. Raising one's own score needs no privilege; a /proc that does
        # not allow it costs only that preference (the driver reads the group's OOM count).
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write(str(int(cfg["oom_score_adj"])))
        except OSError:
            pass
    try:
        os.chdir(cfg["cwd"])
    except OSError as exc:
        raise LaunchError("setup", f"cannot enter {cfg['cwd']!r}: {exc.strerror}") from exc
    handled_fs = int(cfg["handled_fs"])
    ruleset = create_ruleset(handled_fs, int(cfg["handled_net"]), int(cfg["scoped"]))
    for path, access, required in cfg["rules"]:
        add_path_rule(ruleset, path, int(access), handled_fs, bool(required))
    # Chosen entries of this process's own /proc/<pid> (the pid survives exec; children get
    # none): never the whole directory, whose net/ and mountinfo describe the host.
    proc = f"/proc/{os.getpid()}"
    for name, access, required in cfg.get("proc_self", ()):
        add_path_rule(ruleset, f"{proc}/{name}", int(access), handled_fs, bool(required))
    prctl(PR_SET_NO_NEW_PRIVS, 1, "setup")
    restrict_self(ruleset)
    os.close(ruleset)
    os.set_inheritable(report_fd, False)
    _close_fds_above_2(report_fd)
    for which, soft, hard in cfg["rlimits"]:
        try:
            resource.setrlimit(int(which), (int(soft), int(hard)))
        except (OSError, ValueError) as exc:
            raise LaunchError("rlimits", f"setrlimit({which}) failed: {exc}") from exc
    load_seccomp(bytes(cfg["seccomp"]))


def _close_fds_above_2(keep: int) -> None:
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 20)


_NOT_HERE = frozenset((errno.ENOENT, errno.ENOTDIR, errno.ESTALE, errno.ENODEV, errno.ETIMEDOUT))
"""What sends a PATH search on to the next directory (as glibc's execvp does)."""


def _exec(argv: list[str], env: dict[str, str], report_fd: int) -> None:
    """execve with a PATH search in the sandbox's own PATH; returns only on failure.

    What the program's files decide is the program's outcome, told on its stderr as a shell
    would: not found (127), not executable or not a program (126). An argument list and
    environment too large for the kernel (E2BIG: over ARG_MAX, or one string over
    MAX_ARG_STRLEN) or no memory to exec is the runner's failure, reported on the report pipe:
    the program never ran, so nothing it did may be scored."""
    name = argv[0]
    dirs = [""] if "/" in name else env.get("PATH", "/usr/bin:/bin").split(":")
    denied = False
    for d in dirs:
        path = os.path.join(d, name) if d else name
        try:
            os.execve(path, argv, env)
        except OSError as exc:
            if exc.errno in (errno.E2BIG, errno.ENOMEM):
                size = sum(len(a.encode(errors="surrogateescape")) + 1 for a in argv)
                longest = max(len(a.encode(errors="surrogateescape")) + 1 for a in argv)
                _report(
                    report_fd,
                    f"error exec: {os.strerror(exc.errno)} (argv: {len(argv)} strings, "
                    f"{size} bytes, the longest {longest}; env: {len(env)} variables)",
                )
                os._exit(CHILD_FAILED)
            if exc.errno in (errno.EACCES, errno.EPERM):
                denied = True
            elif exc.errno not in _NOT_HERE:  # ENOEXEC, ELOOP, ...: this file cannot run
                os.write(2, f"{name}: cannot execute: {exc.strerror}\n".encode(errors="replace"))
                os._exit(126)
    code, why = (126, "permission denied") if denied else (127, "command not found")
    os.write(2, f"{name}: {why}\n".encode(errors="replace"))
    os._exit(code)


_RT_SIGACTION = {"x86_64": 13, "aarch64": 134}


def _reset_reserved_ignored() -> None:
    """glibc reserves signals 32 and 33, which Python cannot set; one inherited ignored is
    reset with the raw rt_sigaction syscall (an all-zero action is SIG_DFL on every arch)."""
    with open("/proc/self/status", "rb") as f:
        line = next((ln for ln in f if ln.startswith(b"SigIgn:")), b"SigIgn:\t0")
    ignored = int(line.split()[1], 16)
    valid = signal.valid_signals()
    reserved = [s for s in range(1, 65) if ignored >> (s - 1) & 1 and s not in valid]
    number = _RT_SIGACTION.get(os.uname().machine)
    if not reserved or number is None:
        return
    action = (ctypes.c_ulong * 4)()  # handler SIG_DFL, no flags, no restorer, empty mask
    for sig in reserved:
        _syscall(number, ctypes.c_int(sig), action, None, ctypes.c_size_t(8))


def _child(cfg: dict[str, Any], parent: int, report_fd: int) -> None:
    try:
        # An ignored signal stays ignored across exec: Python ignores SIGPIPE and SIGXFSZ
        # itself, and a harness started in the background or under nohup passes on SIGINT,
        # SIGQUIT or SIGHUP ignored. The program starts with the defaults.
        for sig in signal.valid_signals():
            if signal.getsignal(sig) == signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL)
        _reset_reserved_ignored()
        prctl(PR_SET_PDEATHSIG, SIGKILL, "setup")
        if os.getppid() != parent:
            raise LaunchError("setup", "launcher exited before the program started")
        _confine_child(cfg, report_fd)
    except LaunchError as exc:
        _report(report_fd, f"error {exc}")
        os._exit(CHILD_FAILED)
    except BaseException as exc:  # noqa: BLE001 - never exec after an unexpected failure
        _report(report_fd, f"error setup: {type(exc).__name__}: {exc}")
        os._exit(CHILD_FAILED)
    _exec(list(cfg["argv"]), dict(cfg["env"]), report_fd)


class _Deadline(Exception):
    """Raised by the SIGALRM handler: the wall-clock limit is up."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _Deadline


def _supervise(child: int, timeout: float) -> str:
    """Wait for the program (at most ``timeout`` seconds), then kill and reap whatever is
    left; its status line.

    One ``kill(-1, SIGKILL)`` from inside the signal-scoped domain reaches every process of
    this domain and nothing else (a process with SIGKILL pending cannot fork). As the
    subreaper, every descendant is (or becomes, when its parent dies) a child of this
    process, so ECHILD from waitpid means none is left: no zombie outlives the execution,
    whichever uid it runs under."""
    status = None
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, max(timeout, 0.001))
        while status is None:
            pid, wstatus = os.waitpid(-1, 0)
            if pid == child:
                status = wstatus
        signal.setitimer(signal.ITIMER_REAL, 0)
    except _Deadline:
        pass
    signal.setitimer(signal.ITIMER_REAL, 0)
    try:  # noqa: SIM105 - as above
        os.kill(-1, SIGKILL)
    except ProcessLookupError:
        pass
    try:
        while True:
            os.waitpid(-1, 0)
    except ChildProcessError:
        pass
    if status is None:
        return "status timeout 0"
    if os.WIFSIGNALED(status):
        return f"status signal {os.WTERMSIG(status)}"
    return f"status exit {os.waitstatus_to_exitcode(status)}"


def main(args: list[str]) -> int:
    report_fd = int(args[1])
    try:
        cfg_fd = int(args[0])
        with os.fdopen(cfg_fd, "rb") as f:
            cfg = marshal.loads(f.read())
        prctl(PR_SET_PDEATHSIG, SIGKILL, "setup")
        if os.getppid() != int(cfg["parent"]):  # the driver died before we got here
            raise LaunchError("setup", "driver exited before the launcher started")
        checked_abi(cfg.get("abi_override"))
        # Into the sandbox's cgroups (memory and process totals) before anything forks and
        # before Landlock: every descendant inherits the membership and cannot leave it.
        join_cgroups(cfg.get("cgroup_procs", ()))
        prctl(PR_SET_CHILD_SUBREAPER, 1, "setup")
        prctl(PR_SET_NO_NEW_PRIVS, 1, "setup")
        # The outer layer: the signal scope, so the program's nested domain cannot signal
        # this process and this process's kill(-1) stays inside the domain. It must also
        # handle REFER (granted everywhere): a layer that does not handle it makes the
        # kernel refuse every rename or link across directories with EXDEV.
        outer = create_ruleset(FS_REFER, 0, SCOPE_SIGNAL)
        add_path_rule(outer, "/", FS_REFER, FS_REFER, True)
        restrict_self(outer)
        os.close(outer)
    except LaunchError as exc:
        _report(report_fd, f"error {exc}")
        return 1
    except Exception as exc:  # noqa: BLE001 - a broken config is a runner failure
        _report(report_fd, f"error setup: {type(exc).__name__}: {exc}")
        return 1
    launcher = os.getpid()
    child = os.fork()
    if child == 0:
        _child(cfg, launcher, report_fd)
    # The launcher holds none of the program's pipes: EOF comes when the program's side ends.
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    _report(report_fd, _supervise(child, float(cfg["timeout"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
