"""rxl.tree.modules: which modules, where they land, and the link check's core."""

import shutil
import subprocess

import pytest

from rxl.tree import build as B
from rxl.tree import modules as M
from rxl.tree import version as V

IFLIB_MK = (".PATH:\t${SRCTOP}/sys/net\n\nKMOD=\tiflib\nSRCS= \\\n\tiflib.c \\\n"
            "\tmp_ring.c\nSRCS+=\tifdi_if.c\nSRCS+=\tdevice_if.h bus_if.h\n"
            ".include <bsd.kmod.mk>\n")
EM_MK = (".PATH:  ${SRCTOP}/sys/dev/e1000\nKMOD    = if_em\nCORE_SRC = if_em.c em_txrx.c\n"
         "SRCS    += $(CORE_SRC)\n.include <bsd.kmod.mk>\n")


def _mods(tmp_path):
    for name, text in (("iflib", IFLIB_MK), ("em", EM_MK), ("netmap", "KMOD= netmap\n")):
        (tmp_path / "sys/modules" / name).mkdir(parents=True)
        (tmp_path / "sys/modules" / name / "Makefile").write_text(text)
    return tmp_path


def test_makefile_sources_and_kmod():
    dirs, words = M.makefile_sources(IFLIB_MK)
    assert dirs == ["sys/net"]
    assert {"iflib.c", "mp_ring.c", "ifdi_if.c", "bus_if.h"} <= set(words)
    assert M.kmod_name(EM_MK, "em") == "if_em"
    assert M.kmod_name("SRCS= x.c\n", "x") == "x"


def test_touched_modules_by_source_or_makefile(tmp_path):
    src = str(_mods(tmp_path))
    assert M.touched_modules(src, ["sys/net/iflib.c", "sys/netinet/in_pcb.c"]) == ["iflib"]
    assert M.touched_modules(src, ["sys/net/iflib_spread.c"]) == []  # not listed: not built
    assert M.touched_modules(src, ["sys/modules/netmap/Makefile"]) == ["netmap"]
    assert M.touched_modules(src, ["sys/dev/e1000/if_em.c"]) == ["em"]


def test_build_list_puts_the_nic_modules_first(tmp_path):
    src = str(_mods(tmp_path))
    assert M.build_list(src) == ["iflib", "em"]
    assert M.build_list(src, ["sys/modules/netmap/Makefile", "sys/net/iflib.c"]) == \
        ["iflib", "em", "netmap"]


def test_module_path_is_makefile_inc1_s_layout(tmp_path):
    src = str(_mods(tmp_path))
    p = M.module_path(src, "/o", "em")
    assert str(p) == (f"/o{src}/amd64.amd64/sys/MINIMAL/modules{src}/sys/modules/em/"
                      "if_em.ko")
    assert M.module_path(src, "/o", "nosuch").name == "nosuch.ko"


def test_unresolved_follows_the_load_order():
    kernel = ["printf", "malloc", "ether_ifattach"]
    rows = [("iflib.ko", ["iflib_register"], ["printf", "iflib_spread_order"]),
            ("if_em.ko", ["em_attach"], ["iflib_register", "malloc"])]
    assert M.unresolved(kernel, rows) == {"iflib.ko": ["iflib_spread_order"]}
    assert M.unresolved(kernel + ["iflib_spread_order"], rows) == {}
    assert M.unresolved(kernel, list(reversed(rows)))["if_em.ko"] == ["iflib_register"]


def test_plan_stages_with_modules_replaces_no_modules():
    st = B.plan_stages("/s", "/o", kernconf="MINIMAL", toolchain=False, lock=None,
                       modules=["iflib", "em"])
    argv = list(st[0].argv)
    assert st[0].name == "buildkernel-MINIMAL"
    assert "MODULES_OVERRIDE=iflib em" in argv and "NO_MODULES=yes" not in argv
    plain = list(B.plan_stages("/s", "/o", toolchain=False, lock=None)[0].argv)
    assert "NO_MODULES=yes" in plain and not any("MODULES_OVERRIDE" in a for a in plain)
    for bad in ("em x", "../em", "geom/../../x", "/em", "geom//x"):
        with pytest.raises(ValueError, match="bad module name"):
            B.plan_stages("/s", "/o", toolchain=False, lock=None, modules=[bad])
    nested = B.plan_stages("/s", "/o", kernconf="MINIMAL", toolchain=False, lock=None,
                           modules=["msdosfs", "geom/geom_part/geom_part_mbr"])
    assert "MODULES_OVERRIDE=msdosfs geom/geom_part/geom_part_mbr" in list(nested[0].argv)
    assert str(M.module_path("/s", "/o", "geom/geom_part/geom_part_mbr", kmod="geom_part_mbr")
               ).endswith("/sys/MINIMAL/modules/s/sys/modules/geom/geom_part/geom_part_mbr/"
                          "geom_part_mbr.ko")


@pytest.mark.skipif(not (shutil.which("cc") and shutil.which("nm")), reason="needs cc, nm")
def test_undefined_symbols_reads_real_objects(tmp_path):
    (tmp_path / "k.c").write_text("int kfunc(void) { return 1; }\n")
    (tmp_path / "m.c").write_text("int kfunc(void); int gone(void);\n"
                                  "int mfunc(void) { return kfunc() + gone(); }\n")
    for n in ("k", "m"):
        subprocess.run(["cc", "-c", "-o", str(tmp_path / f"{n}.o"), str(tmp_path / f"{n}.c")],
                       check=True)
    bad = M.undefined_symbols(str(tmp_path / "k.o"), [str(tmp_path / "m.o")])
    assert bad == {str(tmp_path / "m.o"): ["gone"]}
    with pytest.raises(M.ModuleError):
        M.symbols(str(tmp_path / "absent.o"), undefined=True)


def test_link_set_bounds_of_the_module_s_own_sections_are_the_kernel_linker_s():
    """link_elf_fix_link_set binds an undefined __start_<s>/__stop_<s> to the
    module's own loaded section <s>; one without that section stays undefined."""
    undef = ["__start_set_cam_xpt_proto_set", "__stop_set_cam_xpt_proto_set",
             "__start_set_other", "__start_", "xpt_bus_register"]
    assert M.link_set_symbols(undef, [".text", "set_cam_xpt_proto_set"]) == [
        "__start_set_cam_xpt_proto_set", "__stop_set_cam_xpt_proto_set"]
    assert M.link_set_symbols(undef, []) == []


@pytest.mark.skipif(not shutil.which("cc") or not shutil.which("nm"), reason="needs cc and nm")
def test_undefined_symbols_lets_the_module_s_own_linker_sets_through(tmp_path):
    """Issue 24: the 14 cam.ko (SET_FOREACH over set_cam_xpt_proto_set) needs its own
    sets' __start_/__stop_ symbols, which nm lists as undefined; the kernel linker
    binds them (a first check refused cam.ko, 2026-12-07). A set the module has no
    section for, and a debug (non-SHF_ALLOC) section, do not count."""
    (tmp_path / "k.c").write_text("int kfunc(void) { return 1; }\n")
    (tmp_path / "m.c").write_text(
        'static int a __attribute__((section("set_foo"), used)) = 1;\n'
        '__asm__(".section set_dbg,\\"\\",@progbits\\n.long 0\\n.text");\n'
        "extern int __start_set_foo[], __stop_set_foo[], __start_set_bar[];\n"
        "extern int __start_set_dbg[];\n"
        "int mfunc(void) { return (int)(__stop_set_foo - __start_set_foo) +\n"
        "    (int)(long)__start_set_bar + (int)(long)__start_set_dbg + kfunc(); }\n")
    for n in ("k", "m"):
        subprocess.run(["cc", "-c", "-o", str(tmp_path / f"{n}.o"), str(tmp_path / f"{n}.c")],
                       check=True)
    m = str(tmp_path / "m.o")
    secs = M.loaded_sections(open(m, "rb").read())
    assert "set_foo" in secs and ".text" in secs and "set_dbg" not in secs
    assert M.undefined_symbols(str(tmp_path / "k.o"), [m]) == {
        m: ["__start_set_bar", "__start_set_dbg"]}


def test_a_14_kernel_with_modules_is_built_without_the_stack_protector(tmp_path):
    """Issue 24: clang 16 (the 14 base's) reaches __stack_chk_guard through the GOT,
    R_X86_64_REX_GOTPCRELX (42) stays in every module (ld -r) and 14's kernel
    linker refused msdosfs.ko at boot. Below clang 19 the module kernel gets
    WITHOUT_SSP=yes; 15's (clang 19) and the module-less kernel stay as they were."""
    from fakefreebsd import version_files
    t14, t15 = tmp_path / "t14", tmp_path / "t15"
    version_files(t14, 14)
    version_files(t15, 15)
    assert V.KMOD_SSP_LLVM == 19 and B.NO_SSP_MAKE_VARS == {"WITHOUT_SSP": "yes"}

    def argv(src, modules):
        return list(B.plan_stages(str(src), "/o", kernconf="MINIMAL", toolchain=False,
                                  lock=None, modules=modules)[0].argv)

    a14 = argv(t14, ["iflib", "em", "msdosfs"])
    assert "--cross-bindir=/usr/lib/llvm-16/bin" in a14
    assert "WITHOUT_SSP=yes" in a14
    assert a14.index("WITHOUT_SSP=yes") < a14.index("buildkernel")
    a15 = argv(t15, ["iflib", "em", "msdosfs"])
    assert "--cross-bindir=/usr/lib/llvm-19/bin" in a15
    assert not any("SSP" in a for a in a15)
    assert not any("SSP" in a for a in argv(t14, []))   # the RXL kernel keeps SSP


# A made-up elf_machdep.c and elf_common.h in the shape of the real ones: a first
# switch (the REL addend) outside the function, elf_reloc_internal's cases, COPY refused.
MACHDEP = """static int
other(void)
{
\tswitch (t) { case R_X86_64_GOTPCREL: break; }
}

static int
elf_reloc_internal(linker_file_t lf, const void *data)
{
\tswitch (rtype) {
\t\tcase R_X86_64_NONE:\tbreak;
\t\tcase R_X86_64_64: /* S + A */
\t\tcase R_X86_64_PC32:
\t\tcase R_X86_64_COPY:\treturn (-1);
\t\tcase R_X86_64_32S :
\t\tdefault: return (-1);
\t}
}

int
elf_reloc(void)
{
\tswitch (x) { case R_X86_64_GOT32: break; }
}
"""
COMMON = ("#define\tR_X86_64_NONE\t\t0\n#define\tR_X86_64_64\t\t1\n#define\tR_X86_64_PC32\t\t2\n"
          "#define\tR_X86_64_GOT32\t\t3\n#define\tR_X86_64_COPY\t\t5\n"
          "#define\tR_X86_64_GOTPCREL\t9\n#define\tR_X86_64_32S\t\t11\n"
          "#define\tR_X86_64_REX_GOTPCRELX\t42\n")


def test_kernel_relocations_are_elf_reloc_internal_s_cases(tmp_path):
    assert M.kernel_relocations(MACHDEP, COMMON) == {
        0: "R_X86_64_NONE", 1: "R_X86_64_64", 2: "R_X86_64_PC32", 11: "R_X86_64_32S"}
    assert M.relocation_names(COMMON)[42] == "R_X86_64_REX_GOTPCRELX"
    with pytest.raises(M.SourceError, match="no elf_reloc_internal"):
        M.kernel_relocations(MACHDEP.replace("\nelf_reloc_internal(", "\nx("), COMMON)
    with pytest.raises(M.SourceError, match="no #define R_X86_64_32S"):
        M.kernel_relocations(MACHDEP, COMMON.replace("R_X86_64_32S", "R_X86_64_32Z"))
    with pytest.raises(M.ModuleError, match="elf_machdep.c: cannot read it"):
        M.tree_relocations(str(tmp_path))
    (tmp_path / "sys/amd64/amd64").mkdir(parents=True)
    (tmp_path / "sys/sys").mkdir(parents=True)
    (tmp_path / M.ELF_MACHDEP).write_text(MACHDEP)
    (tmp_path / M.ELF_COMMON).write_text(COMMON)
    assert M.tree_relocations(str(tmp_path))[0] == M.kernel_relocations(MACHDEP, COMMON)


def test_relocations_refuses_what_is_no_elf64_object(tmp_path):
    for data in (b"", b"\x7fELF" + b"\0" * 60, b"MZ" + b"\0" * 100):
        with pytest.raises(M.ModuleError, match="not an ELF64"):
            M.relocations(data)
    hdr = bytearray(b"\x7fELF\x02\x01\x01" + b"\0" * 57)
    hdr[0x28:0x30] = (1 << 20).to_bytes(8, "little")    # section headers far past the end
    hdr[0x3A:0x3E] = (64).to_bytes(2, "little") + (3).to_bytes(2, "little")
    with pytest.raises(M.ModuleError, match="past the end"):
        M.relocations(bytes(hdr))
    (tmp_path / "x.ko").write_bytes(b"junk")
    with pytest.raises(M.ModuleError, match="x.ko: not an ELF64"):
        M.unhandled_relocations([str(tmp_path / "x.ko")], {})


SSP_C = "extern void fill(char *, int);\nint f(int n) { char b[64]; fill(b, n); return b[n & 63]; }\n"
#: kern.mk's amd64 flags and kmod.mk's with MK_SSP (the 14 and 15 trees alike).
KMOD_CFLAGS = ["-O2", "-g", "-fno-common", "-fno-omit-frame-pointer", "-mcmodel=kernel",
               "-mno-red-zone", "-mno-mmx", "-mno-sse", "-msoft-float",
               "-fno-asynchronous-unwind-tables", "-ffreestanding", "-fwrapv", "-mno-aes",
               "-mno-avx", "-D_KERNEL", "-DKLD_MODULE"]
HANDLED_14 = {0: "R_X86_64_NONE", 1: "R_X86_64_64", 2: "R_X86_64_PC32", 4: "R_X86_64_PLT32",
              6: "R_X86_64_GLOB_DAT", 7: "R_X86_64_JMP_SLOT", 8: "R_X86_64_RELATIVE",
              11: "R_X86_64_32S", 37: "R_X86_64_IRELATIVE"}


def _kmod(tmp_path, llvm, ssp):
    """A module as kmod.mk makes one (ld -r) of SSP_C by Debian's clang-<llvm>."""
    bindir = f"/usr/lib/llvm-{llvm}/bin"
    c, o, ko = tmp_path / "m.c", tmp_path / f"m{llvm}{ssp}.o", tmp_path / f"m{llvm}{ssp}.ko"
    c.write_text(SSP_C)
    subprocess.run([f"{bindir}/clang", "--target=x86_64-unknown-freebsd14.0", *KMOD_CFLAGS,
                    *(["-fstack-protector"] if ssp else []), "-c", "-o", str(o), str(c)],
                   check=True)
    subprocess.run([f"{bindir}/ld.lld", "-m", "elf_x86_64_fbsd", "-d", "--build-id=sha1", "-r",
                    "-o", str(ko), str(o)], check=True)
    return str(ko)


@pytest.mark.skipif(not all(shutil.which(f"/usr/lib/llvm-{v}/bin/{t}")
                            for v in (16, 19) for t in ("clang", "ld.lld")),
                    reason="needs Debian's clang-16, lld-16, clang-19, lld-19")
def test_clang_16_modules_reach_the_stack_guard_through_the_got(tmp_path):
    """Issue 24's cause, measured: with the module flags, clang 16 leaves a
    R_X86_64_REX_GOTPCRELX (42) to __stack_chk_guard in the .ko, which 14's
    elf_reloc_internal does not apply; clang 19 (llvm-project PR #86665) and clang 16
    without the stack protector (WITHOUT_SSP) leave none. The debug sections'
    R_X86_64_32s are not loaded, so they do not count."""
    k16 = _kmod(tmp_path, 16, True)
    assert (42, "__stack_chk_guard") in M.relocations(open(k16, "rb").read())
    assert M.unhandled_relocations([k16], HANDLED_14) == {k16: [(42, "__stack_chk_guard")]}
    k19, k16n = _kmod(tmp_path, 19, True), _kmod(tmp_path, 16, False)
    assert (2, "__stack_chk_guard") in M.relocations(open(k19, "rb").read())
    assert not any(s.startswith("__stack_chk") for _, s in M.relocations(open(k16n, "rb").read()))
    assert M.unhandled_relocations([k19, k16n], HANDLED_14) == {}


@pytest.mark.skipif(not (shutil.which("/usr/lib/llvm-16/bin/clang") and shutil.which("nm")
                         and shutil.which("/usr/lib/llvm-16/bin/ld.lld")),
                    reason="needs Debian's clang-16, lld-16 and nm")
def test_check_modules_refuses_a_relocation_kldload_would_refuse(tmp_path):
    """The nm check passed the 14 msdosfs.ko (every symbol defined); the relocation
    check stops it before the boot, naming the type and the symbol."""
    src, obj = tmp_path / "src", tmp_path / "obj"
    (src / "sys/amd64/amd64").mkdir(parents=True)
    (src / "sys/sys").mkdir(parents=True)
    (src / M.ELF_MACHDEP).write_text(MACHDEP.replace("case R_X86_64_64:",
                                                     "case R_X86_64_64:\ncase R_X86_64_PLT32:"))
    (src / M.ELF_COMMON).write_text(COMMON + "#define\tR_X86_64_PLT32\t4\n")
    ko = M.module_path(str(src), str(obj), "msdosfs")
    ko.parent.mkdir(parents=True)
    shutil.copy(_kmod(tmp_path, 16, True), ko)
    full = B.kernel_path(src, obj, "MINIMAL").with_name("kernel.full")
    (tmp_path / "k.c").write_text("long __stack_chk_guard; void fill(char *p, int n) {}\n"
                                  "void __stack_chk_fail(void) {}\n")
    subprocess.run(["/usr/lib/llvm-16/bin/clang", "-c", "-o", str(full), str(tmp_path / "k.c")],
                   check=True)
    with pytest.raises(M.ModuleLinkError, match=r"msdosfs.ko has R_X86_64_REX_GOTPCRELX \(42\) "
                       r"to __stack_chk_guard: a relocation type sys/amd64/amd64/elf_machdep.c "
                       r"does not apply"):
        B.check_modules(src, obj, "MINIMAL", ["msdosfs"], echo=lambda s: None)
    shutil.copy(_kmod(tmp_path, 16, False), ko)
    said = []
    assert B.check_modules(src, obj, "MINIMAL", ["msdosfs"], echo=said.append) == \
        {"msdosfs": str(ko)}
    assert "every relocation type one the kernel linker applies" in said[-1]


# ------------------------------------------------------------- the root disk (issue 24)
#: The disk lines of 15.0's amd64 MINIMAL (lines 149-156), and a 14.0-like MINIMAL
#: without them; DEFAULTS as both trees' (GEOM_PART_MBR, no disk devices).
DISK_LINES = ("# ATA controllers\ndevice\t\tahci\t\t\t# AHCI-compatible SATA controllers\n\n"
              "# CAM\ndevice\t\tscbus\t\t\t# SCSI bus (required for ATA/SCSI)\n"
              "device\t\tda\t\t\t# Direct Access (disks)\n")
MINIMAL_14 = ("cpu\t\tHAMMER\nident\t\tMINIMAL\noptions \tSCHED_ULE\n"
              "device\t\tvirtio\t\t\t# Generic VirtIO bus (required)\ndevice\t\tvtnet\n")


def _conf(tmp_path, files):
    conf = tmp_path / "sys/amd64/conf"
    conf.mkdir(parents=True, exist_ok=True)
    (tmp_path / "sys/conf").mkdir(exist_ok=True)
    (conf / "DEFAULTS").write_text("machine\t\tamd64\ndevice\t\tisa\noptions \tGEOM_PART_MBR\n")
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    return str(tmp_path)


def test_a_minimal_without_ahci_gets_cam_then_ahci(tmp_path):
    src = _conf(tmp_path, {"sys/amd64/conf/MINIMAL": MINIMAL_14})
    assert M.kernconf_devices(src) == ["isa", "virtio", "vtnet"]     # DEFAULTS' too
    assert M.root_modules(src) == ["msdosfs", "geom/geom_part/geom_part_mbr", "cam", "ahci"]


def test_a_minimal_with_ahci_and_scbus_gets_only_the_fat_root_s(tmp_path):
    src = _conf(tmp_path, {"sys/amd64/conf/MINIMAL": MINIMAL_14 + DISK_LINES})
    assert {"ahci", "scbus", "da"} <= set(M.kernconf_devices(src))
    assert M.root_modules(src) == list(M.ROOT_MODULES) == ["msdosfs",
                                                           "geom/geom_part/geom_part_mbr"]


def test_each_disk_module_is_decided_by_its_own_device(tmp_path):
    # CAM in the kernel, no ahci: only ahci.ko (a cam.ko would be a second CAM)
    src = _conf(tmp_path, {"sys/amd64/conf/MINIMAL": MINIMAL_14 + "device scbus, da\n"})
    assert M.root_modules(src)[2:] == ["ahci"]


def test_includes_are_followed_as_config_8_finds_them(tmp_path):
    # MINIMAL-DEBUG's shape: `include MINIMAL` (sys/amd64/conf), `include "std.debug"`
    # (found as ../../conf/std.debug: sys/conf), a comment, `;`, a continuation line
    src = _conf(tmp_path, {
        "sys/amd64/conf/MINIMAL": MINIMAL_14,
        "sys/conf/std.disk": "device ahci ; device\tscbus # CAM\n",
        "sys/amd64/conf/WITH": 'include MINIMAL\ninclude "std.disk"\nident WITH\n',
        "sys/amd64/conf/CONT": "include MINIMAL\ndevice\tada,\n\tahci\ndevice scbus\n",
        "sys/amd64/conf/WITHOUT": 'include WITH\nnodevice\tahci\n# device ahci\n'})
    assert M.root_modules(src, "WITH") == list(M.ROOT_MODULES)
    assert {"ada", "ahci", "scbus"} <= set(M.kernconf_devices(src, "CONT"))
    assert M.root_modules(src, "CONT") == list(M.ROOT_MODULES)
    assert M.root_modules(src, "WITHOUT") == list(M.ROOT_MODULES) + ["ahci"]
    assert "ahci" not in M.kernconf_devices(src, "WITHOUT")


def test_a_config_that_cannot_be_read_says_which(tmp_path):
    src = _conf(tmp_path, {"sys/amd64/conf/LOOP": "include LOOP\n",
                           "sys/amd64/conf/GONE": "include NOSUCH\n"})
    with pytest.raises(M.ModuleError, match=r"conf/MINIMAL: cannot read it"):
        M.root_modules(src)
    with pytest.raises(M.ModuleError, match=r"include NOSUCH: not in"):
        M.root_modules(src, "GONE")
    with pytest.raises(M.ModuleError, match=r"deeper than 16"):
        M.root_modules(src, "LOOP")

