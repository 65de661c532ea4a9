#!/usr/bin/env python3
"""Kills kiln with SIGKILL at random moments, many times, and checks that
what it writes survives (issue 39): the tuning database opens with every
record a finished process reported, the kernel and plan caches serve no
partial entry, no compiled-model file is half-written, and temporary files
left by killed writers are cleaned up by a later start.

Each round starts, in one cache folder and one tuning database:
  kiln tune     a small model, records going into the database;
  kiln compile  a .kiln file (a new name each round);
  kiln run      a model compiled cold (kernel and plan cache writes);
and kills each after a random delay. After every round the survivors are
checked with kiln itself; at the end, a run with the folder's temporary
files back-dated shows them removed.

  tools/crash_consistency.py BUILD_DIR [--rounds N] [--seed S] [--work DIR]

Prints one line per round and a summary; exits 1 on the first broken file.
A measurement, not a CI test (minutes for 100 rounds).
"""
import argparse
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import time


def start(kiln, args, env):
    return subprocess.Popen([kiln] + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def run(kiln, args, env, timeout=600):
    return subprocess.run([kiln] + args, env=env, capture_output=True, text=True, timeout=timeout)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work")
    options = parser.parse_args()
    kiln = str(pathlib.Path(options.build, "tools", "kiln").resolve())
    work = pathlib.Path(options.work or tempfile.mkdtemp(prefix="kiln-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    db = work / "tuning.db"
    env = dict(os.environ, KILN_CACHE_DIR=str(cache))
    rng = random.Random(options.seed)
    model = ["--model", "resnet18", "--image-size", "32"]
    records_seen = 0
    killed = finished = 0

    def fail(what, result=None):
        print(f"BROKEN after round {round_index}: {what}")
        if result is not None:
            print(result.stdout[-2000:], result.stderr[-2000:])
        sys.exit(1)

    for round_index in range(1, options.rounds + 1):
        kiln_file = work / f"model-{round_index}.kiln"
        seed = str(round_index % 7)  # other weights now and then: cold compiles and new plans
        processes = {
            "tune": start(kiln, ["tune"] + model + ["--budget", "4s", "--db", str(db), "--resume"], env),
            "compile": start(kiln, ["compile"] + model + ["--seed", seed, "-o", str(kiln_file)], env),
            "run": start(kiln, ["run"] + model + ["--seed", seed, "--iters", "1"], env),
        }
        deadline = {name: time.monotonic() + rng.uniform(0.05, 6.0) for name in processes}
        outcome = {}
        while processes:
            for name, process in list(processes.items()):
                if process.poll() is not None:
                    outcome[name] = "finished" if process.returncode == 0 else f"exit {process.returncode}"
                    if process.returncode not in (0, -signal.SIGKILL):
                        fail(f"kiln {name} exited {process.returncode}: {process.stderr.read()[-2000:]}")
                    del processes[name]
                elif time.monotonic() >= deadline[name]:
                    process.kill()
                    process.wait()
                    outcome[name] = "killed"
                    del processes[name]
            time.sleep(0.01)
        killed += sum(1 for o in outcome.values() if o == "killed")
        finished += sum(1 for o in outcome.values() if o == "finished")

        # The database opens, and holds at least every record seen before.
        if db.exists():
            exported = run(kiln, ["tune", "export", "--db", str(db), "-o", str(work / "export.json")], env)
            if exported.returncode != 0 or "skipped" in exported.stderr:
                fail("the tuning database does not open whole", exported)
            records = len(json.loads((work / "export.json").read_text())["records"])
            if records < records_seen:
                fail(f"the tuning database lost records: {records_seen} -> {records}")
            records_seen = records
        # A .kiln file is whole or absent.
        if kiln_file.exists():
            loaded = run(kiln, ["run", str(kiln_file), "--iters", "1"], env)
            if loaded.returncode != 0:
                fail(f"{kiln_file.name} is there but does not run", loaded)
        # The caches serve whole entries: a warm run reports no damaged entry.
        warm = run(kiln, ["run"] + model + ["--seed", seed, "--iters", "1"], env)
        if warm.returncode != 0 or "damaged" in warm.stderr or "corrupt" in warm.stderr.lower():
            fail("a run on the cache folder after the kill", warm)
        print(f"round {round_index}: " + ", ".join(f"{n} {o}" for n, o in sorted(outcome.items())) +
              f"; {records_seen} records", flush=True)

    # Temporary files killed writers left: back-dated past the minute a
    # writer may still need, a prune removes them all.
    temporaries = [p for p in work.rglob("*") if p.is_file() and ".tmp" in p.name]
    for p in temporaries:
        os.utime(p, (time.time() - 3600, time.time() - 3600))
    pruned = run(kiln, ["cache", "prune"], env)
    left = [p for p in work.rglob("*") if p.is_file() and ".tmp" in p.name and p.parent != work]
    print(f"{options.rounds} rounds: {killed} processes killed, {finished} finished; "
          f"{records_seen} tuning records; {len(temporaries)} temporary files left by killed writers, "
          f"{len(left)} after `kiln cache prune`")
    if pruned.returncode != 0 or left:
        fail("temporary files were not cleaned up: " + ", ".join(str(p) for p in left[:5]), pruned)


if __name__ == "__main__":
    main()
