#!/usr/bin/env python3
"""One stage's test counts for scripts/test.sh, from the reports its tests left in one folder:
  <dir>/*.xml       gtest programs (GTEST_OUTPUT=xml:<dir>/, one file per program)
  <dir>/pytest-*.json  pytest runs (tests/e2e/conftest.py, $TESSERA_TEST_COUNTS_DIR)
  <dir>/ctest.xml   ctest's own JUnit report (--output-junit): the programs and scripts it ran

    scripts/test_summary.py STAGE DIR [KIND...]     (KIND: gtest, pytest)

Prints e.g.
  [stage release] ctest: 61 tests, 61 passed | gtest: 452 cases run, 452 passed, 0 failed, 0 skipped | pytest: 78 run, ...
and every skipped gtest case with its reason (an ISA the host lacks is the only skip CI accepts:
tests/common/isa_skip.h). Exits 1 when the stage ran no test case at all (a label that matches
nothing, a build that produced no programs), or none of a KIND named on the command line (the
release stage names both: its gtest cases must not hide an end-to-end run that ran nothing): a
stage that tested nothing must not look green.
"""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ET

ISA_SKIP = "ISA unavailable (CPU or build): "  # tests/common/isa_skip.h's kIsaAbsentSkip


def gtest_counts(folder):
    run = failed = 0
    skipped = []  # (case, message)
    for path in sorted(glob.glob(os.path.join(folder, "*.xml"))):
        if os.path.basename(path) == "ctest.xml":
            continue
        root = ET.parse(path).getroot()
        for case in root.iter("testcase"):
            if case.get("status") == "notrun":  # DISABLED_ or filtered out
                continue
            name = f"{os.path.basename(path)[:-4]}: {case.get('classname')}.{case.get('name')}"
            skip = case.find("skipped")
            if skip is not None or case.get("result") == "skipped":
                # gtest's message is "file:line\n<the GTEST_SKIP() stream>"
                message = (skip.get("message") if skip is not None else "") or ""
                skipped.append((name, message.split("\n", 1)[-1]))
                continue
            run += 1
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
    return run, failed, skipped


def pytest_counts(folder):
    totals = {"passed": 0, "failed": 0, "skipped": 0, "error": 0, "runs": 0}
    for path in glob.glob(os.path.join(folder, "pytest-*.json")):
        with open(path) as f:
            counts = json.load(f)
        totals["runs"] += 1
        for key in ("passed", "failed", "skipped", "error"):
            totals[key] += counts.get(key, 0)
    return totals


def ctest_counts(folder):
    path = os.path.join(folder, "ctest.xml")
    if not os.path.exists(path):
        return None
    total = passed = skipped = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        total += 1
        status = case.get("status")
        if status == "run" and case.find("failure") is None:
            passed += 1
        elif status in ("notrun", "disabled") or case.find("skipped") is not None:
            skipped += 1
    return total, passed, skipped


def main():
    stage, folder = sys.argv[1], sys.argv[2]
    parts = []
    ct = ctest_counts(folder)
    if ct is not None:
        parts.append(f"ctest: {ct[0]} tests, {ct[1]} passed" + (f", {ct[2]} not run" if ct[2] else ""))
    g_run, g_failed, g_skipped = gtest_counts(folder)
    isa = [s for s in g_skipped if s[1].startswith(ISA_SKIP)]
    parts.append(f"gtest: {g_run} cases run, {g_run - g_failed} passed, {g_failed} failed, "
                 f"{len(g_skipped)} skipped ({len(isa)} for an ISA the host lacks)")
    p = pytest_counts(folder)
    p_run = p["passed"] + p["failed"]
    if p["runs"]:
        parts.append(f"pytest: {p_run} run, {p['passed']} passed, {p['failed']} failed, {p['error']} errors, "
                     f"{p['skipped']} skipped")
    print(f"[stage {stage}] " + " | ".join(parts))
    for name, message in g_skipped:
        print(f"[stage {stage}]   {'ISA skip' if (name, message) in isa else 'skipped'}: {name}: {message}")
    if g_run + p_run == 0:
        print(f"[stage {stage}] error: no test ran in this stage", file=sys.stderr)
        return 1
    for kind, ran in (("gtest", g_run), ("pytest", p_run)):
        if kind in sys.argv[3:] and ran == 0:
            print(f"[stage {stage}] error: no {kind} test ran in this stage", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
