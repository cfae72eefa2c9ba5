"""rxl.tree.modules: which modules, where they land, and the link check's core."""

import shutil
import subprocess

import pytest

from rxl.tree import build as B
from rxl.tree import modules as M

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
