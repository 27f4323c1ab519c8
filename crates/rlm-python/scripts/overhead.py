#!/usr/bin/env python3
"""What the Python surface adds over `rlm ask` on the same question.

The scripted model (crates/rlm/tests/mcp_client/scripted_model.py: two
turns, one cell, a verified citation; answers at once) serves both; the same
three-document store is asked "What is the secret code?":

  rlm ask process       `rlm ask --json --store S` spawned, until it exits
  python process        `python -c "...RLM(store=S).completion(...)"` spawned, until it exits
  completion, warm      RLM(store=S).completion(...) in this process, the RLM made once
  completion, memory    the same question over the three texts given as a list (no store)

Runs are interleaved; each row is the median of N (and the engine's own
wall_ms median, from the answers). Run it with the venv that has the wheel:

  RLM_WHEEL_PROFILE=release crates/rlm-python/tests/run.sh -k nothing  # builds + installs the wheel
  cargo build --release -p rlm
  target/rlm-rs-venv/bin/python crates/rlm-python/scripts/overhead.py --rlm target/release/rlm -n 30
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTED_MODEL = HERE.parents[1] / "rlm" / "tests" / "mcp_client" / "scripted_model.py"
QUESTION = "What is the secret code?"
TEXTS = [
    "This memo describes the office move.\nNothing secret here at all.\n",
    "Meeting notes from Tuesday.\nThe secret code is 4721. Keep it safe.\nEnd of notes.\n",
    "Miscellaneous remarks about lunch options and parking spaces.\n",
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rlm", required=True, help="the rlm binary (a release build)")
    ap.add_argument("-n", type=int, default=30, help="runs of each measurement")
    args = ap.parse_args()

    from rlm_rs import RLM

    model = subprocess.Popen([sys.executable, str(SCRIPTED_MODEL), "--port", "0"], stdout=subprocess.PIPE, text=True)
    url = model.stdout.readline().split()[-1]
    tmp = Path(tempfile.mkdtemp())
    docs = tmp / "docs"
    docs.mkdir()
    for name, text in zip("abc", TEXTS):
        (docs / f"{name}.txt").write_text(text)
    store = tmp / "store"
    subprocess.run([args.rlm, "index", str(docs), "--store", str(store)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLM_")}
    env.update(RLM_PROVIDER="openai", RLM_BASE_URL=url, RLM_API_KEY="k", RLM_PRIMARY_MODEL="root-model")
    backend = {"backend": "openai", "backend_kwargs": {"base_url": url, "api_key": "k", "model_name": "root-model"}}
    py_code = (
        "import json, sys\nfrom rlm_rs import RLM\n"
        f"r = RLM(store=sys.argv[1], **{backend!r}).completion({QUESTION!r})\n"
        "print(json.dumps(r.usage))\n"
    )
    warm = RLM(store=store, **backend)
    memory = RLM(**backend)

    rows = {k: ([], []) for k in ("rlm ask process", "python process", "completion, warm", "completion, memory")}

    def timed(name, fn):
        t0 = time.perf_counter()
        wall_ms = fn()
        rows[name][0].append((time.perf_counter() - t0) * 1000)
        rows[name][1].append(wall_ms)

    def ask_process():
        out = subprocess.run([args.rlm, "ask", QUESTION, "--store", str(store), "--json", "-q"], env=env, check=True, capture_output=True, text=True).stdout
        answer = json.loads(out)
        assert "4721" in answer["answer"], answer["answer"]
        return answer["usage"]["wall_ms"]

    def python_process():
        out = subprocess.run([sys.executable, "-c", py_code, str(store)], env=env, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])["wall_ms"]

    def completion(rlm, prompt, root_prompt=None):
        def run():
            r = rlm.completion(prompt, root_prompt=root_prompt)
            assert "4721" in r.response, r.response
            return r.usage["wall_ms"]

        return run

    # One of each first, unmeasured (caches, the page cache, the workers).
    ask_process(), python_process(), completion(warm, QUESTION)(), completion(memory, TEXTS, QUESTION)()
    for _ in range(args.n):
        timed("rlm ask process", ask_process)
        timed("python process", python_process)
        timed("completion, warm", completion(warm, QUESTION))
        timed("completion, memory", completion(memory, TEXTS, QUESTION))
    model.kill()

    print(f"medians of {args.n} interleaved runs (ms):")
    print("| measurement | wall | engine's own wall_ms | outside the engine |")
    print("|---|---|---|---|")
    for name, (walls, engine) in rows.items():
        w, e = statistics.median(walls), statistics.median(engine)
        print(f"| {name} | {w:.1f} | {e:.1f} | {w - e:.1f} |")


if __name__ == "__main__":
    main()
