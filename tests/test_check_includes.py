#!/usr/bin/env python3
"""The include-rule checker (tools/check_includes.py) on small trees of its own:
each broken rule it must catch, and a tree that keeps the rules."""
import importlib.util
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("check_includes", os.path.join(HERE, "..", "tools", "check_includes.py"))
checker = importlib.util.module_from_spec(spec)
spec.loader.exec_module(checker)


def tree(files):
    root = tempfile.mkdtemp(prefix="kiln-includes-")
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)
    return root


CLEAN = {
    "include/kiln/error.h": "#pragma once\n",
    "src/base/check.h": "#include <kiln/error.h>\n",
    "src/kernel/ir.h": '#include "src/base/check.h"\n',
    "shaders/gemm_template.h": '#include "src/kernel/ir.h"\n#include <vector>\n',
    "src/lower/lower.cpp": '#include "shaders/gemm_template.h"\n',
    "tools/main.cpp": '#include "commands.h"\n#include <kiln/error.h>\n',
    "tools/commands.h": "#pragma once\n",
}


class CheckIncludes(unittest.TestCase):
    def test_a_tree_that_keeps_the_rules_passes(self):
        problems, edges = checker.check(tree(CLEAN), exceptions={})
        self.assertEqual(problems, [])
        self.assertEqual(edges["shaders"], {"src/kernel": 1})
        self.assertEqual(edges["tools"], {"include/kiln": 1})  # a tool's own header is no edge

    def test_an_upward_include_is_named_with_its_line(self):
        files = dict(CLEAN)
        files["shaders/gemm_template.cpp"] = '#include "shaders/gemm_template.h"\n\n#include "src/lower/lower.h"\n'
        files["src/lower/lower.h"] = "#pragma once\n"
        problems, _ = checker.check(tree(files), exceptions={})
        self.assertEqual(len(problems), 1)
        self.assertIn("shaders/gemm_template.cpp:3: shaders may not include src/lower/lower.h", problems[0])

    def test_a_tool_past_the_public_api_needs_a_named_exception(self):
        files = dict(CLEAN)
        files["tools/cmd_dump.cpp"] = '#include "src/kernel/ir.h"\n'
        problems, _ = checker.check(tree(files), exceptions={})
        self.assertEqual(len(problems), 1)
        self.assertIn("tools may not include src/kernel/ir.h", problems[0])
        problems, _ = checker.check(tree(files), exceptions={"tools/cmd_dump.cpp": "a reason"})
        self.assertEqual(problems, [])

    def test_an_exception_for_a_missing_file_is_reported(self):
        problems, _ = checker.check(tree(CLEAN), exceptions={"tools/gone.cpp": "a reason"})
        self.assertEqual(problems, ["tools/gone.cpp: named as a tools/ exception but no such file"])

    def test_rules_with_a_cycle_are_refused(self):
        rules = dict(checker.RULES)
        rules["src/kernel"] = rules["src/kernel"] + ["shaders"]
        problems, _ = checker.check(tree(CLEAN), rules=rules, exceptions={})
        self.assertTrue(any("the rules form a cycle" in p and "shaders" in p for p in problems), problems)

    def test_a_file_outside_every_component_is_reported(self):
        files = dict(CLEAN)
        files["src/newfolder/thing.cpp"] = "int x;\n"
        problems, _ = checker.check(tree(files), exceptions={})
        self.assertEqual(len(problems), 1)
        self.assertIn("src/newfolder/thing.cpp: in no component", problems[0])

    def test_kilns_own_tree_keeps_the_rules(self):
        problems, _ = checker.check(os.path.join(HERE, ".."))
        self.assertEqual(problems, [])


if __name__ == "__main__":
    sys.exit(unittest.main())
