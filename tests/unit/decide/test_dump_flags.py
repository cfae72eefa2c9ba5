"""rxl.decide.dump's flags, as sched_ule.c prints them (sys/kern/sched_ule.c:
THREAD for HTT or SMT groups, then SMT; NODE for NUMA nodes; none at all for
a group without flags)."""

from rxl.decide.cpugroup import CG_FLAG_HTT, CG_FLAG_NODE, CG_FLAG_SMT
from rxl.decide.dump import parse_spec


def _group(cpus, flags=""):
    return (f'<group level="1" cache-level="0"><cpu count="{len(cpus)}" '
            f'mask="{sum(1 << c for c in cpus):x}">'
            + ", ".join(map(str, cpus)) + "</cpu>"
            + (f"<flags>{flags}</flags>" if flags else "") + "</group>")


def test_a_group_without_flags_has_none():
    assert parse_spec(f"<groups>{_group([0, 1])}</groups>").root.flags == 0


def test_each_flag_is_its_bit():
    def flags(text):
        return parse_spec(f"<groups>{_group([0, 1], text)}</groups>").root.flags
    assert flags('<flag name="NODE">NUMA node</flag>') == CG_FLAG_NODE
    assert flags('<flag name="THREAD">THREAD group</flag><flag name="SMT">SMT group</flag>') \
        == CG_FLAG_SMT
    assert flags('<flag name="HTT">HTT group</flag><flag name="THREAD">THREAD group</flag>') \
        == CG_FLAG_HTT
    assert flags('<flag name="THREAD">THREAD group</flag>') == CG_FLAG_SMT


def _refusal(text):
    import pytest
    from rxl.decide.cpugroup import TopologyError
    with pytest.raises(TopologyError) as exc:
        parse_spec(text, "paste")
    return str(exc.value)


def test_the_reader_names_the_line_of_each_refusal():
    g = '<group level="1" cache-level="0"><cpu count="1" mask="1">0</cpu></group>'
    assert _refusal(f"<groups>{g}\n{g}</groups>") == ("paste: line 2: a second root <group> "
                                                     "starts here: "
                                       "the input holds two pasted dumps; keep one")
    assert _refusal(f'<groups>\n<flag name="SMT">x</flag>\n{g}</groups>') == (
        "paste: line 2: <flag> outside a <group>")
    deep = "".join(f'<group level="{i}" cache-level="0"><cpu count="1" mask="1">0</cpu>'
                   "<children>\n" for i in range(1, 11))
    assert _refusal("<groups>\n" + deep) == ("paste: line 11: cpu_group tree deeper than 8 "
                                             "levels")


def test_a_count_that_is_not_the_cpus_listed_and_damage_inside_groups_are_refused():
    assert _refusal('<groups>\n<group level="1" cache-level="0">\n<cpu count="3" mask="3">0, 1'
                    "</cpu></group></groups>") == ('paste: line 3: <cpu count="3"> lists 2 '
                                                   "CPUs")
    g = '<group level="1" cache-level="0"><cpu count="1" mask="1">0</cpu></group>'
    msg = _refusal(f"<groups>{g}\n<<\n</groups>")
    assert msg.startswith("paste: line 2, column ") and "not well-formed topology XML" in msg
    # after </groups>, text is a prompt
    assert parse_spec(f"<groups>{g}</groups>\nroot@guest:~ # <<\n").root.cpus == (0,)


def test_a_cut_or_mismatched_dump_is_named_as_such():
    assert _refusal('<group level="1" cache-level="0">\n<cpu count="1" mask="1">0</cpu>\n') == (
        "paste: line 2: the dump ends before the <group> of line 1 is closed (cut off?)")
    assert _refusal('<groups>\n<group level="1" cache-level="0"><cpu count="1" mask="1">0'
                    "</cpu>\n</children></group></groups>") == (
        "paste: line 3, column 3: a closing tag that does not match the <group> of line 2 "
        "(lines lost or pasted twice?)")


def test_a_second_dump_is_named_on_the_line_it_starts():
    g = '<group level="1" cache-level="0"><cpu count="1" mask="1">0</cpu></group>'
    assert _refusal(f"<groups>{g}</groups><groups>\n{g}</groups>") == (
        "paste: line 1: a second dump starts here: the input holds two pasted dumps; keep one")


def test_text_around_the_dump_that_no_paste_carries_is_refused_naming_its_line():
    g = '<group level="1" cache-level="0"><cpu count="1" mask="1">0</cpu></group>'
    assert _refusal(f"<groups>{g}</groups>\ntrailing garbage\n") == (
        "paste: line 2: text after the dump that is no shell prompt; remove it")
    assert _refusal(f"junk before\n<groups>{g}</groups>\n") == (
        "paste: line 1: text before the dump that is no shell prompt or sysctl line; "
        "remove it")
    assert _refusal(f"<groups>\njunk\n{g}</groups>") == (
        "paste: line 2: text outside every <group> of the dump; remove it")
    assert _refusal(f"<groups>{g}\n\nno final groups tag") == (
        "paste: line 3: text outside every <group> of the dump; remove it")
    # what a terminal paste carries is still read
    for ok in (f"$ sysctl kern.sched.topology_spec\nkern.sched.topology_spec: <groups>{g}"
               "</groups>\n$ \n", f"sysctl -n kern.sched.topology_spec\n<groups>{g}</groups>",
               f"<groups>{g}\nroot@guest:~ # "):
        assert parse_spec(ok).root.cpus == (0,)


def test_a_second_cpu_element_in_one_group_is_refused_naming_its_line():
    cpu = '<cpu count="1" mask="1">0</cpu>'
    assert _refusal(f'<groups>\n<group level="1" cache-level="0">{cpu}\n{cpu}</group></groups>') \
        == ("paste: line 3: a second <cpu> in the <group> of line 2; a group lists its CPUs "
            "once")
    assert _refusal(f'<groups><group level="1" cache-level="0"><cpu count="1" mask="1">0{cpu}'
                    "</cpu></group></groups>").startswith("paste: line 1: a second <cpu>")
