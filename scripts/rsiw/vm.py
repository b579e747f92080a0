#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""QEMU launcher for the rsiw test VMs (Python 3.11 standard library only).

A VM boots the kernel built by scripts/rsiw/kernel.sh with the guest root of
scripts/rsiw/mkroot.sh shared read-only over 9p; the guest init
(scripts/rsiw/guest/init) puts a tmpfs overlay on top, so the guest can write
anywhere. Shares (9p mount tags):

  rsiwroot   $RSIW_CACHE/rootfs                   /          (ro, overlaid)
  rsiwguest  scripts/rsiw/guest                   /rsiw/guest (ro)
  rsiwmods   <build>/modroot/lib/modules          /lib/modules (ro)
  rsiwtests  tests/                               /rsiw/tests (ro)
  rsiwrun    the run's output directory           /rsiw/run, and its
                                                  <role>/ at /rsiw/out (rw)

Topologies: one VM (eth0 = a virtio-net on a lone link: QEMU user-mode
networking with restrict=on, which drains frames and reaches nothing; or no
NIC at all), or two
VMs "a" and "b" whose eth0s are joined by a QEMU stream netdev over a Unix socket
(a listens on a free port, b connects). VM <n> (a=1, b=2) has 169.254.0.<n>/16
and fe80::<n>/64 on eth0.

A VM may get an emulated NVMe drive (a sparse raw file under
$RSIW_CACHE/nvme) and an emulated NVDIMM (persistent memory, for the commit
extensions): QEMU's "pc,nvdimm=on" machine with a shared file-backed memory
backend (a sparse file under $RSIW_CACHE/nvdimm) and an nvdimm device whose
label area lies beyond the SIZE bytes the guest gets, so that ndctl can make
the whole region a devdax namespace. Both files go when the run ends. NFIT
is an ACPI table: only the pmem kernel variant has ACPI (and the NVDIMM
drivers), so NVDIMM VMs run that kernel (kernel=pmem in a case header); its
VMs without an NVDIMM boot with acpi=off, like the kernels without ACPI (see
qemu_argv).

Every run has a hard timeout, saves each console to console-<role>.log in the
output directory, returns the guest's exit status (the RSIW-EXIT-STATUS
marker; no marker is a failure) and fails if a console shows a kernel splat
(SPLAT_PATTERNS below).

  vm.py run [--vms 1|2] [--driver rsiw] [--cmd CMD] [--cmd-b CMD] [--nvdimm 128M] [--nvme 1G] ...
  vm.py shell [--variant debug] [--driver siw] [--peer siw] [--nvdimm 128M]
  vm.py selftest
  vm.py probe-kvm [--force]
"""

import argparse
import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
SCRIPTS = TOP / "scripts" / "rsiw"

# ---------------------------------------------------------------------------
# Splat rules: one list, in one place. A console line fails the run if the
# kernel printed it (it carries a printk timestamp, "[   12.345678] ") and its
# message matches one of these, or if it is a kmemleak report that the guest
# init dumped ("kmemleak-report: unreferenced object ...").
SPLAT_PATTERNS = [
    r"\bBUG:",                       # BUG: KASAN, BUG: sleeping function..., BUG: unable to handle
    r"kernel BUG at",
    r"\bWARNING:",                   # WARN*(), and lockdep's "WARNING: possible ... locking"
    r"\bOops\b",
    r"Kernel panic",
    r"general protection fault",
    r"Call Trace:",
    r"\bUBSAN\b",
    r"KASAN: ",                      # "BUG: KASAN: ..." and KASAN's other reports
    r"possible circular locking",
    r"possible recursive locking",
    r"inconsistent lock state",
    r"\bINFO: ",                     # lockdep, hung tasks, RCU stalls
    r"sleeping function called from invalid context",
    r"scheduling while atomic",
    r"unreferenced object 0x",       # kmemleak
    r"new suspected memory leak",    # kmemleak
    r"rust_panic",
    r"panicked at",
    r"soft lockup|hard LOCKUP",
    r"detected stalls? on CPU|self-detected stall",
    r"list_(add|del) corruption",
]
# Kernel lines that match a pattern above but are not splats.
SPLAT_ALLOW = [
    r"KASAN: KernelAddressSanitizer",  # boot banner (it is lower case today)
    # A perftest client's crash in librdmacm (a user-space fault the kernel
    # reports): its retry after losing perftest's connection race
    # (linux-rdma/perftest#93; see perftest_refused in tests/vm/lib.sh). Its
    # exit status still fails the step unless serve_client runs it again.
    r"^traps: ib_\w+\[\d+\] general protection fault ip:\S+ sp:\S+ error:\S+ in librdmacm\.so",
]
# Lockdep reports of upstream code that the tests can trigger: see
# tests/vm/py/known_lockdep.py.
sys.path.insert(0, str(TOP / "tests" / "vm" / "py"))
from known_lockdep import KNOWN_LOCKDEP, lock_class as _lock_class  # noqa: E402

_SPLAT_RE = re.compile("|".join(f"(?:{p})" for p in SPLAT_PATTERNS))
_ALLOW_RE = re.compile("|".join(f"(?:{p})" for p in SPLAT_ALLOW))
_KLINE_RE = re.compile(r"\[\s*\d+\.\d{6}\]\s(.*)")
KMEMLEAK_PREFIX = "kmemleak-report: "

EXIT_MARKER = re.compile(r"^RSIW-EXIT-STATUS: (\d+)\s*$")
INIT_MARKER = re.compile(r"^RSIW-INIT: .*uptime=([\d.]+)")


def splat_in(line: str) -> bool:
    """Whether a console line is a kernel splat (see SPLAT_PATTERNS)."""
    if line.startswith(KMEMLEAK_PREFIX):
        return bool(line[len(KMEMLEAK_PREFIX):].strip())
    m = _KLINE_RE.search(line)
    if not m:
        return False
    msg = m.group(1)
    return bool(_SPLAT_RE.search(msg)) and not _ALLOW_RE.search(msg)


# ---------------------------------------------------------------------------
# Settings shared with the shell scripts (scripts/rsiw/lib.sh is the source).

_LIB = None


def lib() -> dict:
    global _LIB
    if _LIB is None:
        out = subprocess.run(
            ["bash", "-c", f". {shlex.quote(str(SCRIPTS / 'lib.sh'))}; "
             'echo "$RSIW_CACHE"; echo "$RSIW_VARIANT"'],
            check=True, capture_output=True, text=True).stdout.splitlines()
        _LIB = {"cache": Path(out[0]), "variant": out[1]}
    return _LIB


def cache() -> Path:
    return lib()["cache"]


def exit_on_signals() -> None:
    """SIGTERM/SIGHUP raise SystemExit, so that the finally blocks kill the
    QEMUs (they run in their own sessions, away from Ctrl-C and kill -PGID)."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: sys.exit(128 + signum))


def log_dir(what: str) -> Path:
    """A new directory name under $RSIW_CACHE/logs for one run."""
    return cache() / "logs" / f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{what}"


def log(msg: str) -> None:
    print(f"[rsiw] {msg}", file=sys.stderr, flush=True)


def die(msg: str) -> "None":
    print(f"[rsiw] error: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


@dataclass
class Kernel:
    variant: str
    build: Path
    bzimage: Path
    modules: Path      # .../modroot/lib/modules
    release: str

    @classmethod
    def find(cls, variant: str) -> "Kernel":
        build = cache() / f"build-{variant}"
        bz = build / "arch/x86/boot/bzImage"
        rel_file = build / "include/config/kernel.release"
        if not bz.is_file() or not rel_file.is_file():
            die(f"no {variant} kernel in {build}: run scripts/rsiw/kernel.sh build {variant}")
        rel = rel_file.read_text().strip()
        mods = build / "modroot/lib/modules"
        if not (mods / rel).is_dir():
            die(f"no modules for {rel} in {mods}: run scripts/rsiw/kernel.sh build {variant}")
        return cls(variant, build, bz, mods, rel)

    @classmethod
    def snapshot(cls, variant: str, dest: Path) -> "Kernel":
        """Copy the built kernel and its modules to dest (~10 MB), so that a
        kernel build starting during the run cannot pull them away.
        kernel.sh holds $RSIW_CACHE/kernel.lock while it builds; wait for it."""
        cache().mkdir(parents=True, exist_ok=True)
        with open(cache() / "kernel.lock", "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                log("a kernel build is running; waiting for it (kernel.lock)")
                fcntl.flock(lock, fcntl.LOCK_SH)
            k = cls.find(variant)
            if dest.exists():
                shutil.rmtree(dest)
            (dest / "modules").mkdir(parents=True)
            shutil.copy2(k.bzimage, dest / "bzImage")
            shutil.copytree(k.modules / k.release, dest / "modules" / k.release, symlinks=True)
            fcntl.flock(lock, fcntl.LOCK_UN)
        return cls(variant, k.build, dest / "bzImage", dest / "modules", k.release)


def rootfs() -> Path:
    root = cache() / "rootfs"
    if not (root / ".rsiw-root").is_file():
        die(f"no guest root in {root}: run scripts/rsiw/mkroot.sh")
    if subprocess.run([str(SCRIPTS / "mkroot.sh"), "--check"]).returncode != 0:
        log("warning: the guest root is out of date (run scripts/rsiw/mkroot.sh)")
    return root


# ---------------------------------------------------------------------------
# VMs

ROLES = "ab"


@dataclass
class VM:
    role: str = "a"                 # "a" or "b"
    driver: str = "rsiw"            # the RDMA driver the guest should use
    cmd: str = "true"               # shell command run by the guest init
    net: str = "lone"               # none | lone | server | client
    link: str = ""                  # stream netdev address (server/client)
    env: dict = field(default_factory=dict)
    kargs: list = field(default_factory=list)  # extra kernel command line
    # This VM's own kernel (a snapshot, see Kernel.snapshot) instead of the
    # run's, e.g. a non-debug kernel for a peer that does not run rsiw.
    kernel: Kernel | None = None
    # An emulated NVDIMM of this many MiB (0: none); it implies ACPI.
    nvdimm: int = 0
    # An emulated NVMe drive (PCI) of this many MiB (0: none), e.g. a test
    # device for blktests' nvme/ device tests.
    nvme: int = 0
    # Boot with ACPI (the other VMs get acpi=off).
    acpi: bool = False

    @property
    def index(self) -> int:
        return ROLES.index(self.role) + 1

    @property
    def mac(self) -> str:
        return f"52:54:00:72:73:{self.index:02x}"


@dataclass
class VMResult:
    role: str
    log: Path
    status: int | None = None       # from the exit marker
    init_time: float | None = None  # seconds from QEMU start to the init marker
    init_uptime: float | None = None  # guest uptime at the init marker
    wall: float = 0.0
    splats: list = field(default_factory=list)
    qemu_rc: int | None = None
    timed_out: bool = False
    kmemleak_done: bool = False
    known: list = field(default_factory=list)  # KNOWN_LOCKDEP reports seen
    # A circular-locking report being read: its lines so far, its lock
    # classes, whether the next line names one, and its KNOWN_LOCKDEP entry.
    _report: list | None = None
    _report_locks: list = field(default_factory=list)
    _report_next: bool = False
    _report_known: str | None = None

    def problems(self) -> list[str]:
        p = []
        if self.timed_out:
            p.append("timeout")
        if self.splats:
            p.append(f"kernel splat ({len(self.splats)} lines)")
        if self.status is None:
            if not self.timed_out:
                p.append("no exit marker (guest crashed?)")
        elif self.status != 0:
            p.append(f"exit status {self.status}")
        return p


@dataclass
class RunResult:
    vms: list
    out: Path

    @property
    def ok(self) -> bool:
        return all(not v.problems() for v in self.vms)

    @property
    def skipped(self) -> bool:
        """All guests exited 77 (the automake 'skip' code) without splats."""
        return all(v.status == 77 and not v.splats and not v.timed_out for v in self.vms)

    def reason(self) -> str:
        r = []
        for v in self.vms:
            for p in v.problems():
                r.append(f"{v.role}: {p}" if len(self.vms) > 1 else p)
        return ", ".join(r) or "ok"

    def report_splats(self, file=sys.stderr) -> None:
        for v in self.vms:
            if v.splats:
                print(f"--- kernel splat on VM {v.role} ({v.log}):", file=file)
                for line in v.splats[:40]:
                    print(f"    {line}", file=file)
                if len(v.splats) > 40:
                    print(f"    ... {len(v.splats) - 40} more", file=file)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def link_address() -> str:
    """The address of the stream netdev that joins two VMs.

    A Unix socket by default: QEMU does not set TCP_NODELAY on an inet stream
    netdev, so the host's Nagle held back every frame that followed an
    unacknowledged one until the peer's delayed ACK (a 4 KiB message, three
    frames, took ~22 ms one way). RSIW_VM_LINK=inet restores the loopback TCP
    link.

    Neither gives the guests' virtio-net a virtio-net header, so it has no
    checksum offload and no scatter-gather, and the guest linearizes every
    frame it sends. RSIW_VM_LINK=tap (root, /dev/net/tun; for measurements,
    e.g. of zero-copy TX) joins the VMs through two host taps on a bridge of
    their own instead: the devices then offer checksum offload,
    scatter-gather and TSO."""
    kind = os.environ.get("RSIW_VM_LINK", "unix")
    if kind == "inet":
        return f"addr.type=inet,addr.host=127.0.0.1,addr.port={free_port()}"
    if kind == "tap":
        tag = f"{os.getpid() % 100000}{free_port() % 1000}"
        br = f"rsbr{tag}"
        cmds = [["ip", "link", "add", br, "type", "bridge"]]
        for end in "ab":
            cmds += [["ip", "tuntap", "add", "mode", "tap", f"rst{end}{tag}"],
                     ["ip", "link", "set", f"rst{end}{tag}", "master", br, "up"]]
        cmds += [["ip", "link", "set", br, "up"]]
        for c in cmds:
            subprocess.run(c, check=True)
        return f"tap:{tag}"
    # sun_path holds 107 bytes: a short directory of its own, removed by the
    # caller with the run.
    d = Path(tempfile.mkdtemp(prefix="rsiw-link-"))
    return f"addr.type=unix,addr.path={d}/s"


def remove_link(link: str) -> None:
    if link.startswith("tap:"):
        tag = link[4:]
        for dev in (f"rsta{tag}", f"rstb{tag}", f"rsbr{tag}"):
            subprocess.run(["ip", "link", "del", dev], stderr=subprocess.DEVNULL)
        return
    m = re.search(r"addr\.path=([^,]+)", link)
    if m:
        shutil.rmtree(Path(m.group(1)).parent, ignore_errors=True)


# The kernels with KASAN: more memory, and slower under TCG (tests/vm/run).
KASAN_VARIANTS = ("debug", "pmem-kasan")


def default_mem(variant: str, nvms: int) -> int:
    env = os.environ.get("RSIW_VM_MEM")
    if env:
        return int(env)
    return 2048 if variant in KASAN_VARIANTS else 1024


def default_smp() -> int:
    env = os.environ.get("RSIW_VM_SMP")
    if env:
        return int(env)
    # One vCPU unless a case asks for more (smp=N): until -smp N,sockets=N
    # every guest had one CPU, and the suite's run time and timing are
    # measured so; two real vCPUs under TCG made verbs-stress 6 times and
    # kernel-verbs 4 times slower on a 2-core host.
    return 1


def host_tsc_khz() -> int | None:
    """The host's TSC frequency in kHz, if the host has a constant TSC of known
    frequency. A TCG guest's TSC counts the host's TSC."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    flags = re.search(r"^flags\s*:(.*)$", info, re.M)
    if not flags or not {"constant_tsc", "nonstop_tsc"} <= set(flags.group(1).split()):
        return None
    try:
        dmesg = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        dmesg = ""
    m = (re.findall(r"tsc: Refined TSC clocksource calibration: ([0-9.]+) MHz", dmesg)
         or re.findall(r"tsc: Detected ([0-9.]+) MHz processor", dmesg))
    if m:
        return int(float(m[-1]) * 1000)
    mhz = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", info, re.M)
    if mhz and "tsc_known_freq" in flags.group(1).split():
        return int(float(mhz.group(1)) * 1000)
    return None


def tsc_kargs(accel: str, variant: str) -> list[str]:
    """Under TCG the guest cannot calibrate its TSC (no HPET or PM timer
    without ACPI, and the PIT calibration fails): it falls back to the jiffies
    clocksource (4 ms resolution, no high-resolution timers) and perftest,
    which needs the TSC frequency, prints no figures. Give it the frequency.
    Default: the bench variant only ($RSIW_VM_TSC=1/0 overrides)."""
    want = os.environ.get("RSIW_VM_TSC", "1" if variant == "bench" else "0") == "1"
    khz = host_tsc_khz() if want and accel == "tcg" else None
    return [f"tsc_early_khz={khz}", "tsc=reliable"] if khz else []


def parse_size_mib(text: str) -> int:
    """'128M', '1G' or '64' (MiB) in MiB; 0 for '', '0' or 'no'."""
    t = text.strip().upper()
    if t in ("", "0", "NO", "OFF"):
        return 0
    m = re.fullmatch(r"(\d+)([MG]?)(I?B)?", t)
    if not m:
        raise ValueError(f"bad size {text!r} (e.g. 128M or 1G)")
    return int(m.group(1)) * (1024 if m.group(2) == "G" else 1)


def scratch_path(out: Path, vm: VM, kind: str) -> Path:
    """The file behind VM's NVDIMM or NVMe drive (kind): in the cache (not
    in the run directory, which the guest sees), one per run and VM."""
    return cache() / kind / f"{out.name}-{os.getpid()}-{vm.role}.img"


# The NVDIMM's label area: at the end of the backend, beyond the SIZE bytes
# of persistent memory the guest gets, so that the region stays a multiple
# of its alignment (16 MiB on x86) and ndctl can make it one devdax
# namespace. QEMU leaves the labels uninitialised: the region is label-less
# ("legacy", one namespace of the whole region) until "ndctl init-labels".
NVDIMM_LABEL = 128 << 10


def nvdimm_argv(vm: VM, out: Path, mem: int) -> tuple[str, str, list[str]]:
    """The -machine and -m values and the extra devices for VM.

    Persistent memory needs ACPI: the guest finds the NVDIMM through the NFIT
    table (drivers/acpi/nfit), and QEMU's microvm has no nvdimm, so the VM is
    a "pc" with nvdimm=on, a memory hotplug slot for the DIMM and maxmem
    above RAM + NVDIMM. The backend is a shared file mapping, so that the
    guest's stores reach the file (persistence across boots is not used).
    label-size gives the DIMM a namespace label area (NVDIMM_LABEL). No
    unarmed=on: an unarmed DIMM is read-only to Linux."""
    if not vm.nvdimm:
        return "pc", f"{mem}M", []
    path = scratch_path(out, vm, "nvdimm")
    return ("pc,nvdimm=on", f"{mem}M,slots=2,maxmem={mem + vm.nvdimm + 2}M",
            ["-object", f"memory-backend-file,id=nv0,share=on,mem-path={path},"
             f"size={(vm.nvdimm << 20) + NVDIMM_LABEL}",
             "-device", f"nvdimm,id=nvd0,memdev=nv0,label-size={NVDIMM_LABEL}"])


def nvme_argv(vm: VM, out: Path) -> list[str]:
    """An emulated NVMe controller with one namespace on a raw file (QEMU's
    nvme device; the guest's nvme driver names it nvme0 when it loads before
    any fabrics controller exists)."""
    if not vm.nvme:
        return []
    path = scratch_path(out, vm, "nvme")
    return ["-drive", f"file={path},if=none,id=nvm0,format=raw,cache=unsafe",
            "-device", "nvme,serial=rsiw-nvme0,drive=nvm0"]


def scratch_create(out: Path, vm: VM) -> None:
    """Make the sparse, zero-filled files behind VM's NVDIMM and NVMe drive."""
    for kind, size in (("nvdimm", (vm.nvdimm << 20) + NVDIMM_LABEL if vm.nvdimm else 0),
                       ("nvme", vm.nvme << 20)):
        if size:
            path = scratch_path(out, vm, kind)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(size)


def scratch_remove(out: Path, vm: VM) -> None:
    for kind, mib in (("nvdimm", vm.nvdimm), ("nvme", vm.nvme)):
        if mib:
            scratch_path(out, vm, kind).unlink(missing_ok=True)


# The kernel variants built with ACPI (scripts/rsiw/kernel.sh,
# kernel/configs/rsiw-pmem.config); the others have none, and their command
# line stays as it was.
ACPI_VARIANTS = ("pmem", "pmem-kasan")


def qemu_argv(vm: VM, kernel: Kernel, root: Path, out: Path, accel: str,
              mem: int, smp: int, console: list[str]) -> list[str]:
    machine, memory, nvdimm = nvdimm_argv(vm, out, mem)
    # The kernels with ACPI (the pmem variant, for the NVDIMM's NFIT) boot
    # the VMs without an NVDIMM with acpi=off, as the other kernels boot: no
    # AML interpreter or ACPI device scan at boot, the same clocksource (no
    # PM timer: see tsc_kargs) and the same CPU discovery (the MP table).
    acpi = [] if vm.acpi or vm.nvdimm or kernel.variant not in ACPI_VARIANTS else ["acpi=off"]
    if vm.nvdimm and kernel.variant not in ACPI_VARIANTS:
        log(f"warning: VM {vm.role} has an NVDIMM but the {kernel.variant} kernel has no ACPI "
            f"(use the pmem kernel: {', '.join(ACPI_VARIANTS)})")
    cmdline = " ".join(tsc_kargs(accel, kernel.variant) + acpi + [
        "console=ttyS0,115200", "root=rsiwroot", "rootfstype=9p",
        "rootflags=trans=virtio,version=9p2000.L,msize=512000,cache=loose",
        "ro", "init=/rsiw-boot", "panic=-1", "mitigations=off",
        "no_hash_pointers", "printk.devkmsg=on", "printk.time=1",
        f"rsiwvm.role={vm.role}", f"rsiwvm.index={vm.index}",
    ] + (["rsiwvm.trace"] if os.environ.get("RSIW_TRACE_INIT") else []) + vm.kargs)
    argv = ["qemu-system-x86_64", "-nodefaults", "-no-user-config",
            "-display", "none", "-vga", "none", "-no-reboot",
            "-machine", machine, "-accel", accel, "-cpu", "max,la57=off" if accel == "tcg" else "host",
            # One socket per vCPU: the kernels boot without ACPI (or with
            # acpi=off) and find their CPUs in SeaBIOS's MP table, which
            # lists one logical CPU per package; "-smp 2" is one socket with
            # two cores since QEMU 6.2, so the guest saw one CPU.
            "-smp", f"{smp},sockets={smp}", "-m", memory,
            "-kernel", str(kernel.bzimage), "-append", cmdline,
            "-device", "virtio-rng-pci"] + nvdimm + nvme_argv(vm, out) + console
    shares = [("rsiwroot", root, True), ("rsiwguest", SCRIPTS / "guest", True),
              ("rsiwmods", kernel.modules, True), ("rsiwtests", TOP / "tests", True),
              ("rsiwrun", out, False)]
    for i, (tag, path, ro) in enumerate(shares):
        argv += ["-fsdev", f"local,id=fs{i},path={path},security_model=none,multidevs=remap"
                 + (",readonly=on" if ro else ""),
                 "-device", f"virtio-9p-pci,fsdev=fs{i},mount_tag={tag}"]
    if vm.net != "none":
        nd = {"lone": "user,id=n0,restrict=on,ipv6=off",
              "server": f"stream,id=n0,server=on,{vm.link}",
              "client": f"stream,id=n0,server=off,{vm.link},reconnect-ms=200",
              }[vm.net]
        if vm.link.startswith("tap:"):
            end = "a" if vm.net == "server" else "b"
            nd = f"tap,id=n0,ifname=rst{end}{vm.link[4:]},script=no,downscript=no"
        argv += ["-netdev", nd, "-device", f"virtio-net-pci,netdev=n0,mac={vm.mac}"]
    if os.environ.get("RSIW_VM_MONITOR") == "1":
        # A human monitor on a Unix socket (out/monitor-<role>.sock), for a caller that
        # pauses and resumes the VM ("stop"/"cont": its clocks stop with it), such as
        # scripts/rsiw/bench.py.
        argv += ["-monitor", f"unix:{out}/monitor-{vm.role}.sock,server=on,wait=off"]
    # Extra QEMU options for debugging, e.g. RSIW_QEMU_ARGS=-perfmap to profile
    # a TCG guest with the host's perf.
    return argv + shlex.split(os.environ.get("RSIW_QEMU_ARGS", ""))


def write_guest_env(vm: VM, vms: list[VM], out: Path, variant: str, extra: dict) -> None:
    d = out / vm.role
    d.mkdir(parents=True, exist_ok=True)
    peers = [v for v in vms if v is not vm]
    env = {
        "RSIW_CMD": vm.cmd,
        "RSIW_DRIVER": vm.driver,
        "RSIW_VMS": str(len(vms)),
        "RSIW_ROLES": " ".join(v.role for v in vms),
        "RSIW_VARIANT": variant,
        "RSIW_IP": f"169.254.0.{vm.index}",
        "RSIW_IP6": f"fe80::{vm.index}",
        "RSIW_PEER_IP": " ".join(f"169.254.0.{p.index}" for p in peers),
        "RSIW_PEER_IP6": " ".join(f"fe80::{p.index}" for p in peers),
        "RSIW_PEER_DRIVER": " ".join(p.driver for p in peers),
        # MiB of emulated NVDIMM and NVMe drive in this VM (0: none).
        "RSIW_NVDIMM": str(vm.nvdimm),
        "RSIW_NVME": str(vm.nvme),
    }
    env.update(extra)
    env.update(vm.env)
    (d / "guest.env").write_text("".join(f"{k}={shlex.quote(str(v))}\n" for k, v in env.items()))


def run(vms: list[VM], variant: str | None = None, out: Path | None = None,
        timeout: float = 600, accel: str | None = None, echo: bool = False,
        extra_env: dict | None = None, mem: int | None = None, smp: int | None = None,
        name: str = "run", kernel: Kernel | None = None) -> RunResult:
    """Boot the VMs, wait for them, and collect their results. Without a
    kernel (see Kernel.snapshot), the variant's build is snapshotted into
    out/.kernel first."""
    variant = variant or lib()["variant"]
    if out is None:
        out = log_dir(name)
    out.mkdir(parents=True, exist_ok=True)
    own_snapshot = kernel is None
    kernel = kernel or Kernel.snapshot(variant, out / ".kernel")
    root = rootfs()
    accel = accel or choose_accel(kernel, root)
    mems = [mem or default_mem(v.kernel.variant if v.kernel else variant, len(vms)) for v in vms]
    smp = smp or default_smp()
    if len(vms) == 2:
        link = link_address()
        vms[0].net, vms[0].link = "server", link
        vms[1].net, vms[1].link = "client", link
    results, procs, files = [], [], []
    cpus = sorted(os.sched_getaffinity(0))
    pin = os.environ.get("RSIW_VM_PIN") == "1" and 1 < len(vms) <= len(cpus)
    t0 = time.monotonic()
    try:
        for vm, vm_mem in zip(vms, mems):
            vm_kernel = vm.kernel or kernel
            write_guest_env(vm, vms, out, vm_kernel.variant, extra_env or {})
            (out / vm.role / "exit-status").unlink(missing_ok=True)
            scratch_create(out, vm)
            logp = out / f"console-{vm.role}.log"
            logp.write_bytes(b"")
            argv = qemu_argv(vm, vm_kernel, root, out, accel, vm_mem, smp,
                             ["-chardev", f"file,id=con,path={logp}", "-serial", "chardev:con"])
            if pin:
                # One host CPU per VM: each VM's vCPU, I/O thread and timers stay together
                # and do not compete with the other VM's (steadier timings).
                argv = ["taskset", "-c", str(cpus[len(procs) % len(cpus)]), *argv]
            (out / f"qemu-{vm.role}.cmd").write_text(shlex.join(argv) + "\n")
            qlog = open(out / f"qemu-{vm.role}.log", "wb")
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=qlog,
                                          stderr=subprocess.STDOUT, start_new_session=True))
            qlog.close()
            results.append(VMResult(vm.role, logp))
            files.append([open(logp, "rb"), b""])
            if vm.net == "server":
                time.sleep(0.3)  # let it listen before the client tries
        deadline = t0 + timeout
        finished_at = None
        while True:
            now = time.monotonic()
            for r, p, f in zip(results, procs, files):
                data = f[0].read()
                if data:
                    f[1] += data
                    *lines, f[1] = f[1].split(b"\n")
                    for raw in lines:
                        _scan_line(r, raw.decode("utf-8", "replace").rstrip("\r"), now - t0, echo)
                if r.qemu_rc is None and p.poll() is not None:
                    r.qemu_rc = p.returncode
                    r.wall = now - t0
            if all(r.qemu_rc is not None for r in results):
                break
            # One VM gone: give the others a grace period, then stop them.
            if any(r.qemu_rc is not None for r in results):
                finished_at = finished_at or now
                if now - finished_at > 60:
                    for r, p in zip(results, procs):
                        if r.qemu_rc is None:
                            log(f"VM {r.role}: peer exited 60 s ago; stopping it")
                            r.timed_out = True
                            _kill(p)
            if now > deadline:
                for r, p in zip(results, procs):
                    if r.qemu_rc is None:
                        log(f"VM {r.role}: timeout after {timeout:.0f} s; killing QEMU")
                        r.timed_out = True
                        _kill(p)
                deadline = float("inf")
            time.sleep(0.2)
        for r, f in zip(results, files):
            if f[1]:
                _scan_line(r, f[1].decode("utf-8", "replace"), time.monotonic() - t0, echo)
            _report_flush(r)
            for k in r.known:
                log(f"VM {r.role}: known upstream lockdep report, not a failure: {k}")
            # A kernel message can split the marker line on the console; the
            # init wrote the same status to <role>/exit-status just before.
            sf = out / r.role / "exit-status"
            if r.status is None and not r.timed_out and sf.is_file():
                try:
                    r.status = int(sf.read_text().strip())
                except ValueError:
                    pass
            if r.qemu_rc not in (0, None) and r.status is None:
                qlog = (out / f"qemu-{r.role}.log").read_text(errors="replace").strip()
                if qlog:
                    log(f"VM {r.role}: QEMU exited {r.qemu_rc}: {qlog.splitlines()[-1]}")
    finally:
        for p in procs:
            if p.poll() is None:
                _kill(p)
        for f in files:
            f[0].close()
        for vm in vms[:1]:
            remove_link(vm.link)
        for vm in vms:
            scratch_remove(out, vm)
    res = RunResult(results, out)
    if own_snapshot and res.ok:
        # Kept after a failure, so that qemu-*.cmd can re-run it.
        shutil.rmtree(out / ".kernel", ignore_errors=True)
    (out / "result.json").write_text(json.dumps({
        "ok": res.ok, "reason": res.reason(), "accel": accel, "kernel": kernel.release,
        "vms": [{"role": r.role, "status": r.status, "init_time": r.init_time,
                 "init_uptime": r.init_uptime, "wall": r.wall, "timed_out": r.timed_out,
                 "qemu_rc": r.qemu_rc, "splats": r.splats, "log": str(r.log)} for r in results],
    }, indent=1) + "\n")
    return res


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _scan_line(r: VMResult, line: str, t: float, echo: bool) -> None:
    if echo:
        print(f"{r.role}| {line}", flush=True)
    m = INIT_MARKER.search(line)
    if m and r.init_time is None:
        r.init_time, r.init_uptime = t, float(m.group(1))
    m = EXIT_MARKER.match(line)
    if m:
        r.status = int(m.group(1))
    if line.startswith("RSIW-KMEMLEAK-DONE"):
        r.kmemleak_done = True
    if _lockdep_report(r, line):
        return
    if splat_in(line):
        r.splats.append(line)


def _lockdep_report(r: VMResult, line: str) -> bool:
    """Holds back the lines of a circular-locking report until its two lock
    classes are known: a KNOWN_LOCKDEP report is dropped up to its end
    ("</TASK>"), any other one counts as usual. Returns whether it took the
    line."""
    m = _KLINE_RE.search(line)
    if not m:
        return False
    msg = m.group(1)
    if r._report is None:
        if "possible circular locking dependency detected" not in msg:
            return False
        r._report, r._report_locks, r._report_next, r._report_known = [line], [], False, None
        return True
    if r._report_known is not None:
        if "</TASK>" in msg:
            r._report = None
        return True
    r._report.append(line)
    if r._report_next:
        r._report_locks.append(_lock_class(msg) or "?")
        r._report_next = False
    elif "is trying to acquire lock:" in msg or "but task is already holding lock:" in msg:
        r._report_next = True
    known = KNOWN_LOCKDEP.get(frozenset(r._report_locks)) if len(r._report_locks) == 2 else None
    if known:
        r._report_known = known
        r.known.append(known)
    elif len(r._report_locks) >= 2 or len(r._report) > 50:
        _report_flush(r)
    return True


def _report_flush(r: VMResult) -> None:
    """Counts the held-back lines of an unknown (or unfinished) report."""
    lines, r._report = r._report or [], None
    if r._report_known is None:
        r.splats.extend(l for l in lines if splat_in(l))


# ---------------------------------------------------------------------------
# KVM: guests hang on some hosts, so it is used only after a boot probe
# succeeded; the verdict is cached per host kernel in $RSIW_CACHE/kvm-verdict.

def choose_accel(kernel: Kernel, root: Path, force_probe: bool = False) -> str:
    env = os.environ.get("RSIW_ACCEL")
    if env:
        return env
    host = os.uname().release
    vfile = cache() / "kvm-verdict"
    if not force_probe and vfile.is_file():
        parts = vfile.read_text().split()
        if len(parts) == 2 and parts[0] == host:
            return parts[1]
    verdict = "tcg"
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        log("probing KVM (boot to the guest init within 30 s)")
        r = run([VM(cmd="true", net="none")], variant=kernel.variant, accel="kvm",
                timeout=30, extra_env={"RSIW_KMEMLEAK": "0"},
                out=cache() / "logs" / "kvm-probe", kernel=kernel)
        v = r.vms[0]
        if v.init_time is not None and v.status == 0:
            verdict = "kvm"
            log(f"KVM works (init after {v.init_time:.1f} s)")
        else:
            log("KVM does not work here (no init within 30 s); using TCG")
    else:
        log("/dev/kvm not usable; using TCG")
    vfile.write_text(f"{host} {verdict}\n")
    return verdict


# ---------------------------------------------------------------------------
# Interactive shell: the VM's console on stdio.

def shell(args) -> int:
    variant = args.variant or lib()["variant"]
    out = Path(args.out) if args.out else log_dir("shell")
    out.mkdir(parents=True, exist_ok=True)
    kernel = Kernel.snapshot(variant, out / ".kernel")
    root = rootfs()
    accel = args.accel or choose_accel(kernel, root)
    vm = VM(driver=args.driver, net=args.net, kargs=args.karg, nvdimm=args.nvdimm, nvme=args.nvme,
            acpi=args.acpi)
    vms = [vm]
    if args.peer:
        # VM b in the background, its console in console-b.log.
        peer = VM("b", args.peer, args.peer_cmd, kargs=args.karg, nvdimm=args.nvdimm,
                  nvme=args.nvme, acpi=args.acpi)
        vms.append(peer)
        link = link_address()
        vm.net, vm.link, peer.net, peer.link = "server", link, "client", link
    nvms = len(vms)
    mem, smp = args.mem or default_mem(variant, nvms), args.smp or default_smp()
    extra = {"RSIW_SHELL": "1", "RSIW_KMEMLEAK": "0" if args.no_kmemleak else "1"}
    try:
        sz = os.get_terminal_size(sys.stdin.fileno())
        extra["RSIW_STTY"] = f"rows {sz.lines} cols {sz.columns}"
        extra["TERM"] = os.environ.get("TERM", "linux")
    except OSError:
        pass
    write_guest_env(vm, vms, out, variant, extra)
    logp = out / "console-a.log"
    argv = qemu_argv(vm, kernel, root, out, accel, mem, smp,
                     ["-chardev", f"stdio,id=con,mux=on,signal=off,logfile={logp}",
                      "-serial", "chardev:con", "-mon", "chardev=con,mode=readline"])
    peer_proc = None
    if args.peer:
        write_guest_env(peer, vms, out, variant, {"RSIW_KMEMLEAK": "0"})
        plog = out / "console-b.log"
        pargv = qemu_argv(peer, kernel, root, out, accel, mem, smp,
                          ["-chardev", f"file,id=con,path={plog}", "-serial", "chardev:con"])
        with open(out / "qemu-b.log", "wb") as q:
            peer_proc = subprocess.Popen(pargv, stdin=subprocess.DEVNULL, stdout=q,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        log(f"peer VM b ({args.peer}) at 169.254.0.2 / fe80::2%eth0, console: {plog}")
    for v in vms:
        scratch_create(out, v)
    log(f"booting the {variant} kernel ({accel}); console log: {logp}")
    log("Ctrl-A X quits QEMU, Ctrl-A C toggles the monitor; 'exit' in the shell powers off")
    try:
        rc = subprocess.call(argv)
    finally:
        if sys.stdin.isatty():
            subprocess.call(["stty", "sane"])
        if peer_proc:
            _kill(peer_proc)
        remove_link(vm.link)
        for v in vms:
            scratch_remove(out, v)
        shutil.rmtree(out / ".kernel", ignore_errors=True)
    splats = []
    for v in vms:
        p = out / f"console-{v.role}.log"
        text = p.read_text(errors="replace") if p.exists() else ""
        splats += [f"{v.role}| {l}" for l in text.splitlines() if splat_in(l)]
    if splats:
        log(f"kernel splat (logs in {out}):")
        for l in splats[:40]:
            print(f"    {l}", file=sys.stderr)
        return 1
    return rc


def selftest(args) -> int:
    """Check the rig itself: exit status, splat detection, timeout."""
    variant = args.variant or lib()["variant"]
    base = log_dir("selftest")
    base.mkdir(parents=True)
    kernel = Kernel.snapshot(variant, base / ".kernel")
    bad = 0

    checks = 0

    def check(what, cond):
        nonlocal bad, checks
        print(f"{'ok' if cond else 'NOT OK'}: {what}", flush=True)
        bad += not cond
        checks += 1

    def report(held: str, wanted: str) -> VMResult:
        r = VMResult("a", base / "none")
        t = "[   65.856027] "
        for line in ["WARNING: possible circular locking dependency detected",
                     "rm/161 is trying to acquire lock:",
                     f"ffff88800634c420 ({wanted}){{+.+.}}-{{4:4}}, at: rdma_destroy_id+0x16/0x20",
                     "but task is already holding lock:",
                     f"ffffffffa029ada8 ({held}){{++++}}-{{4:4}}, at: x+0x59/0x1f0 [nvmet]",
                     "Call Trace:", " <TASK>", " dump_stack_lvl+0x67/0x90", " </TASK>"]:
            _scan_line(r, t + line, 0, False)
        _report_flush(r)
        return r

    r = report("nvmet_config_sem", "&id_priv->handler_mutex")
    check("a KNOWN_LOCKDEP report is logged, not a splat", not r.splats and len(r.known) == 1)
    r = report("nvmet_config_sem", "&other->mutex")
    check("any other circular-locking report is a splat", len(r.splats) == 2 and not r.known)
    r = run([VM(cmd="echo '<4>WARNING: rsiw rig self-test splat' >/dev/kmsg; exit 3")],
            variant, base / "splat", 300, args.accel, kernel=kernel)
    v = r.vms[0]
    check("exit status 3 comes back", v.status == 3)
    check("a WARNING: line in the kernel log is a splat", len(v.splats) == 1 and not r.ok)
    check("the kmemleak scan ran", v.kmemleak_done)
    it = v.init_time or 0
    r = run([VM(cmd="sleep 1000")], variant, base / "timeout", it + 15, args.accel,
            kernel=kernel, extra_env={"RSIW_KMEMLEAK": "0"})
    check("a hung guest is killed at the timeout", r.vms[0].timed_out and not r.ok)
    r = run([VM("a", "rsiw", "barrier x; echo $RSIW_PEER_IP > /rsiw/out/peer"),
             VM("b", "siw", "barrier x; ping -c 1 -W 5 $RSIW_PEER_IP")],
            variant, base / "pair", 300, args.accel, kernel=kernel,
            extra_env={"RSIW_KMEMLEAK": "0", "BASH_ENV": "/rsiw/tests/vm/lib.sh"})
    check("two VMs reach each other", r.ok and (base / "pair/a/peer").read_text().strip() == "169.254.0.2")
    shutil.rmtree(base / ".kernel", ignore_errors=True)
    print(f"{checks - bad} passed, {bad} failed")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="op", required=True)

    def common(p):
        p.add_argument("--variant", help="kernel variant (debug, light, bench, pmem); default $RSIW_VARIANT or debug")
        p.add_argument("--accel", choices=["kvm", "tcg"], help="override the KVM probe")
        p.add_argument("--mem", type=int, help="MiB per VM (default 2048 debug, 1024 bench; $RSIW_VM_MEM)")
        p.add_argument("--smp", type=int, help="vCPUs per VM (default 1; $RSIW_VM_SMP)")
        p.add_argument("--out", help="output directory (default $RSIW_CACHE/logs/<time>-<op>)")
        p.add_argument("--karg", action="append", default=[], metavar="ARG",
                       help="extra kernel command line argument (repeatable), e.g. kunit.enable=0")
        p.add_argument("--nvdimm", type=parse_size_mib, default=0, metavar="SIZE",
                       help="give each VM an emulated NVDIMM of SIZE (e.g. 128M; implies ACPI)")
        p.add_argument("--nvme", type=parse_size_mib, default=0, metavar="SIZE",
                       help="give each VM an emulated NVMe drive of SIZE (e.g. 1G)")
        p.add_argument("--acpi", action="store_true",
                       help="boot with ACPI (default: acpi=off unless the VM has an NVDIMM)")

    p = sub.add_parser("run", help="boot VM(s), run a command, check the consoles")
    common(p)
    p.add_argument("--vms", type=int, choices=[1, 2], default=1)
    p.add_argument("--driver", default="rsiw", help="driver for VM a (rsiw or siw)")
    p.add_argument("--driver-b", default="siw", help="driver for VM b")
    p.add_argument("--cmd", default="true", help="command for VM a (and b, unless --cmd-b)")
    p.add_argument("--cmd-b", help="command for VM b")
    p.add_argument("--net", default="lone", choices=["none", "lone"],
                   help="eth0 of a single VM: a lone link (default) or none")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("-q", "--quiet", action="store_true", help="do not echo the consoles")

    p = sub.add_parser("shell", help="interactive shell in a VM (console on stdio)")
    common(p)
    p.add_argument("--driver", default="rsiw", help="sets $RSIW_DRIVER in the guest")
    p.add_argument("--net", default="lone", choices=["none", "lone"])
    p.add_argument("--no-kmemleak", action="store_true", help="skip the kmemleak scan at exit")
    p.add_argument("--peer", choices=["rsiw", "siw"],
                   help="also boot VM b with this driver, linked to the shell's eth0")
    p.add_argument("--peer-cmd", default='modprobe "$RSIW_DRIVER" && '
                   'rdma link add "${RSIW_DRIVER}0" type "$RSIW_DRIVER" netdev eth0; exec sleep infinity',
                   help="command VM b runs (default: add ${driver}0 on eth0 and wait)")

    p = sub.add_parser("selftest", help="check the rig: exit status, splat detection, timeout, two VMs")
    p.add_argument("--variant")
    p.add_argument("--accel", choices=["kvm", "tcg"])

    p = sub.add_parser("probe-kvm", help="(re)probe whether KVM guests boot here")
    p.add_argument("--variant")
    p.add_argument("--force", action="store_true")

    args = ap.parse_args()
    exit_on_signals()
    if args.op == "shell":
        return shell(args)
    if args.op == "selftest":
        return selftest(args)
    if args.op == "probe-kvm":
        v = args.variant or lib()["variant"]
        k = Kernel.snapshot(v, cache() / "logs" / "kvm-probe" / ".kernel")
        try:
            print(choose_accel(k, rootfs(), force_probe=args.force))
        finally:
            shutil.rmtree(cache() / "logs" / "kvm-probe" / ".kernel", ignore_errors=True)
        return 0
    vms = [VM("a", args.driver, args.cmd, args.net, kargs=args.karg, nvdimm=args.nvdimm,
              nvme=args.nvme, acpi=args.acpi)]
    if args.vms == 2:
        vms.append(VM("b", args.driver_b, args.cmd_b or args.cmd, kargs=args.karg,
                      nvdimm=args.nvdimm, nvme=args.nvme, acpi=args.acpi))
    r = run(vms, args.variant, Path(args.out) if args.out else None, args.timeout,
            args.accel, echo=not args.quiet, mem=args.mem, smp=args.smp)
    for v in r.vms:
        it = f"{v.init_time:.1f} s (guest uptime {v.init_uptime:.1f} s)" if v.init_time else "never"
        log(f"VM {v.role}: status {v.status}, init after {it}, total {v.wall:.1f} s, log {v.log}")
    if not r.ok:
        r.report_splats()
        log(f"FAILED: {r.reason()}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
