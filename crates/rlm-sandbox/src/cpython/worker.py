"""The CPython back-end's worker: one Python REPL driven over fds 0 and 1.

It speaks the same frames as the monty worker (src/protocol.rs): a u32 header
length, a JSON header, a u32 blob count, then (u64 length, bytes) per blob.
The parent starts it inside bubblewrap; the isolation (no network, a read-only
file system, no environment, rlimits, a seccomp filter) is the operating
system's, set up before this script runs. Nothing here is a security boundary:
it only keeps the protocol and the REPL's behaviour the same as monty's.
"""

import ast
import asyncio
import builtins
import inspect
import json
import os
import signal
import struct
import sys
import threading
import time

MAX_VALUE_BYTES = 256 * 1024 * 1024
MAX_VALUE_DEPTH = 100
MAX_HEADER_BYTES = MAX_VALUE_BYTES + 1024 * 1024
MAX_PRINTED_CHARS_PER_CELL = 100_000_000
OOM_EXIT_CODE = 65
CELL_FILE = "<cell>"


class Disconnected(Exception):
    """The parent went away or spoke nonsense."""


class CellStopped(BaseException):
    """Ends the running cell; the worker keeps stopping it if user code catches it."""

    def __init__(self, exc_type, message, ended_by_host=None):
        super().__init__(message)
        self.exc_type = exc_type
        self.message = message
        self.ended_by_host = ended_by_host


class Channel:
    """Framed private copies of fds 0 and 1 (fds 0 and 1 then point at /dev/null,
    so nothing Python or a C extension prints can corrupt the stream)."""

    def __init__(self):
        rfd, wfd = os.dup(0), os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.close(null)
        self.input = os.fdopen(rfd, "rb", buffering=1 << 20)
        self.output = os.fdopen(wfd, "wb", buffering=1 << 16)

    def read_exact(self, n):
        data = self.input.read(n)
        if data is None or len(data) != n:
            raise Disconnected()
        return data

    def recv(self):
        head = self.input.read(4)
        if not head:
            return None, []
        if len(head) != 4:
            raise Disconnected()
        (length,) = struct.unpack("<I", head)
        if length > MAX_HEADER_BYTES:
            raise Disconnected()
        header = json.loads(self.read_exact(length))
        (count,) = struct.unpack("<I", self.read_exact(4))
        blobs = []
        for _ in range(count):
            (size,) = struct.unpack("<Q", self.read_exact(8))
            blobs.append(self.read_exact(size))
        return header, blobs

    def send_bytes(self, header):
        if len(header) > MAX_HEADER_BYTES:
            raise ValueError("message over the frame limit")
        self.output.write(struct.pack("<I", len(header)) + header + b"\0\0\0\0")
        self.output.flush()

    def send(self, msg):
        self.send_bytes(dumps(msg))


def dumps(msg):
    return json.dumps(msg, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode(
        "utf-8"
    )


def unsendable(what, why, size=0):
    if why == "deep":
        return (
            f"{what} is nested too deep: more than {MAX_VALUE_DEPTH} levels of lists, tuples "
            "and dicts (the limit); flatten it, or pass a string"
        )
    return (
        f"{what} is {size} bytes as JSON; the limit is {MAX_VALUE_BYTES} bytes: pass a "
        "slice or a summary, or split the work over several calls"
    )


class TooDeep(Exception):
    pass


def to_json(value, depth=0):
    """A Python value as JSON, the way the monty worker converts: tuples and sets
    become arrays, non-string dict keys their str(), other objects their repr."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**63 else str(value)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        if depth >= MAX_VALUE_DEPTH:
            raise TooDeep()
        return [to_json(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if depth >= MAX_VALUE_DEPTH:
            raise TooDeep()
        return {
            (k if isinstance(k, str) else str(k)): to_json(v, depth + 1) for k, v in value.items()
        }
    try:
        return repr(value)
    except Exception:  # a repr that fails must not end the worker
        return f"<{type(value).__name__} object>"


def string_size(value, depth=0):
    """A lower bound of the JSON size of `value` (strings without escapes), to
    refuse a huge argument before building its JSON."""
    if isinstance(value, str):
        return len(value) + 2
    if isinstance(value, (list, tuple, set, frozenset)):
        if depth >= MAX_VALUE_DEPTH:
            raise TooDeep()
        return 2 + sum(string_size(v, depth + 1) + 1 for v in value)
    if isinstance(value, dict):
        if depth >= MAX_VALUE_DEPTH:
            raise TooDeep()
        return 2 + sum(
            string_size(k if isinstance(k, str) else str(k), depth + 1) + string_size(v, depth + 1) + 2
            for k, v in value.items()
        )
    return 4


def cut_points(text, max_bytes):
    half = max(max_bytes // 2, 1024)
    if len(text) <= 2 * half:
        return None
    return half, len(text) - half


def cut_middle(text, max_bytes):
    points = cut_points(text, max_bytes)
    if points is None:
        return text
    head, tail = points
    return f"{text[:head]}\n... [{tail - head} characters cut] ...\n{text[tail:]}"


def repr_within(value, max_bytes):
    if isinstance(value, str):
        points = cut_points(value, max_bytes)
        if points is not None:
            head, tail = points
            head_repr, tail_repr = repr(value[:head]), repr(value[tail:])
            return f"{head_repr[:-1]}\n... [{tail - head} characters cut] ...\n{tail_repr[1:]}"
    try:
        return cut_middle(repr(value), max_bytes)
    except Exception as e:  # noqa: BLE001 - the repr of user objects may fail
        return f"<repr failed: {type(e).__name__}: {e}>"


class CapturedOutput:
    """print() capture keeping the head and the tail within a byte budget."""

    def __init__(self, max_bytes):
        self.half = max(max_bytes // 2, 1024)
        self.head = []
        self.head_len = 0
        self.tail = []
        self.tail_len = 0
        self.total = 0
        self.cut = False

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self.total += len(text)
        if self.total > MAX_PRINTED_CHARS_PER_CELL:
            raise MemoryError(
                f"output limit exceeded: a cell may print at most {MAX_PRINTED_CHARS_PER_CELL} "
                "characters; print a slice, a count or a summary instead"
            )
        rest = text
        if not self.cut and self.head_len < self.half:
            take = rest[: self.half - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            rest = rest[len(take) :]
            if not rest:
                return len(text)
        self.cut = True
        self.tail.append(rest)
        self.tail_len += len(rest)
        if self.tail_len > 2 * self.half:
            joined = "".join(self.tail)[-self.half :]
            self.tail = [joined]
            self.tail_len = len(joined)
        return len(text)

    def flush(self):
        pass

    def isatty(self):
        return False

    def finish(self):
        head = "".join(self.head)
        if not self.cut:
            return head, self.total
        tail = "".join(self.tail)[-self.half :]
        dropped = self.total - len(head) - len(tail)
        if dropped <= 0:
            return head + tail, self.total
        return f"{head}\n... [{dropped} characters cut] ...\n{tail}", self.total


class Worker:
    def __init__(self, chan):
        self.chan = chan
        self.ns = None
        self.functions = {}
        self.limits = {}
        self.cells = 0
        self.answers = {}
        self.host_calls = 0
        self.stop = None
        self.loop = None
        self.in_protocol = 0
        self.timed_out = False
        self.in_cell = False
        # Threads of a cell wait for host answers together: one reads the
        # stream at a time and files each answer for the thread it belongs
        # to (two reading at once would split each other's frames).
        self.answered = threading.Condition()
        self.reading = False
        self.waiting = 0
        self.paused_left = 0

    # ---- start -------------------------------------------------------------

    def start(self, msg, blobs):
        uses = {}
        for _, spec in msg["inputs"]:
            for b in blob_uses(spec):
                uses[b] = uses.get(b, 0) + 1
        texts = {}

        def text(i):
            if i not in texts:
                if i >= len(blobs):
                    raise ValueError(f"input blob {i} missing")
                texts[i] = blobs[i].decode("utf-8")
                blobs[i] = b""
            return texts[i]

        ns = {"__name__": "__main__", "__builtins__": builtins}
        for name, spec in msg["inputs"]:
            kind = spec["kind"]
            if kind == "text":
                ns[name] = text(spec["blob"])
            elif kind == "text_list":
                ns[name] = [text(b) for b in spec["blobs"]]
            elif kind == "documents":
                ns[name] = [
                    {
                        "index": d["index"],
                        "name": d["name"],
                        "id": d["id"],
                        "chars": d["chars"],
                        "chunk_count": d["chunk_count"],
                        "text": text(d["text_blob"]),
                    }
                    for d in spec["docs"]
                ]
            elif kind == "json":
                ns[name] = spec["value"]
            elif kind == "assembled":
                ns[name] = "".join(
                    p["text"] if p["kind"] == "literal" else text(p["blob"]) for p in spec["pieces"]
                )
            else:
                raise ValueError(f"unknown input kind {kind!r}")
        self.functions = {name: bool(awaitable) for name, awaitable in msg["functions"]}
        for name, awaitable in self.functions.items():
            ns[name] = self.async_function(name) if awaitable else self.sync_function(name)
        ns["SHOW_VARS"] = self.show_vars
        self.limits = msg["limits"]
        self.ns = ns
        # Our own frames (cell runner, event loop) need room above the user's limit.
        sys.setrecursionlimit(int(self.limits["max_recursion_depth"]) + 60)
        self.loop = asyncio.new_event_loop()

    # ---- host functions ----------------------------------------------------

    def sync_function(self, name):
        worker = self

        def host_function(*args, **kwargs):
            call_id = worker.send_call(name, args, kwargs, False)
            return worker.wait_answer(call_id)

        host_function.__name__ = host_function.__qualname__ = name
        return host_function

    def async_function(self, name):
        worker = self

        def host_function(*args, **kwargs):
            # Sent when called, so every call of a gather is in flight at once.
            call_id = worker.send_call(name, args, kwargs, True)

            async def answer():
                return worker.wait_answer(call_id)

            return answer()

        host_function.__name__ = host_function.__qualname__ = name
        return host_function

    def send_call(self, name, args, kwargs, awaitable):
        if self.stop is not None:
            raise self.stop
        self.host_calls += 1
        if self.host_calls > int(self.limits["max_host_calls_per_cell"]):
            self.stop_cell(
                CellStopped(
                    "RuntimeError",
                    "host call limit reached: a cell may call host functions at most "
                    f"{self.limits['max_host_calls_per_cell']} times; batch the work "
                    "(e.g. llm_query_batched) or split it over several cells",
                )
            )
        what = f"the argument of {name}"
        try:
            size = string_size(list(args) + list(kwargs.values()))
            if size > MAX_VALUE_BYTES:
                raise ValueError(unsendable(what, "large", size))
            msg = {
                "type": "host_call",
                "call_id": (self.cells << 32) | self.host_calls,
                "name": name,
                "args": [to_json(a) for a in args],
                "kwargs": {str(k): to_json(v) for k, v in kwargs.items()},
                "awaitable": awaitable,
            }
        except TooDeep:
            raise ValueError(unsendable(what, "deep")) from None
        try:
            header = dumps(msg)
        except (UnicodeEncodeError, ValueError) as e:
            raise ValueError(f"{what} cannot be sent: {e}") from None
        if len(header) > MAX_HEADER_BYTES:
            raise ValueError(unsendable(what, "large", len(header)))
        self.protocol(lambda: self.chan.send_bytes(header))
        return msg["call_id"]

    def wait_answer(self, call_id):
        with self.answered:
            # Time spent waiting for the host is not the cell's: the timer
            # pauses while any thread waits.
            self.waiting += 1
            if self.waiting == 1 and self.in_cell:
                self.paused_left = signal.setitimer(signal.ITIMER_REAL, 0)[0]
            try:
                while call_id not in self.answers:
                    if self.reading:
                        self.answered.wait()
                    else:
                        self.read_answer()
            finally:
                self.waiting -= 1
                if self.waiting == 0 and self.paused_left > 0 and self.in_cell:
                    signal.setitimer(signal.ITIMER_REAL, self.paused_left)
                    self.paused_left = 0
            result = self.answers.pop(call_id)
        kind = result["kind"]
        if kind == "value":
            return result["value"]
        if kind == "raise":
            raise exception(result["exc_type"], result["message"])
        if kind == "end_cell":
            self.stop_cell(CellStopped("SystemExit", result["reason"], result["reason"]))
        self.stop_cell(CellStopped(result["exc_type"], result["message"]))

    def read_answer(self):
        """Reads one host answer off the stream (the caller holds `answered`,
        released while it reads) and wakes the threads waiting for theirs."""
        self.reading = True
        self.answered.release()
        try:
            header, _ = self.protocol(self.chan.recv)
        finally:
            self.answered.acquire()
            self.reading = False
            self.answered.notify_all()
        if header is None or header.get("type") != "host_result":
            raise Disconnected()
        if header["call_id"] >> 32 == self.cells:
            self.answers[header["call_id"]] = header["result"]

    def stop_cell(self, stop):
        """Ends the cell with `stop`; if user code catches it, every following
        line raises it again (a trace function on every frame of the stack)."""
        self.stop = stop

        def tracer(frame, event, arg):
            if self.stop is not None and event == "line" and frame.f_code.co_filename == CELL_FILE:
                raise self.stop
            return tracer

        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == CELL_FILE:
                frame.f_trace = tracer
                frame.f_trace_lines = True
            frame = frame.f_back
        sys.settrace(tracer)
        raise stop

    def protocol(self, step):
        """Runs a read or write of the stream with the cell timer held off (a
        timeout raised half-way through a frame would corrupt the stream)."""
        self.in_protocol += 1
        try:
            return step()
        finally:
            self.in_protocol -= 1
            if self.in_protocol == 0 and self.timed_out and self.stop is None:
                self.raise_timeout()

    def show_vars(self):
        skip = set(self.functions) | {"SHOW_VARS"}
        found = {
            name: type(value).__name__
            for name, value in self.ns.items()
            if not name.startswith("_")
            and name not in skip
            and not inspect.ismodule(value)
        }
        if not found:
            return "No variables created yet. Use ```repl``` blocks to create variables."
        return "Available variables: " + str(found)

    # ---- cells ---------------------------------------------------------------

    def raise_timeout(self):
        self.timed_out = False
        limit = int(self.limits["cell_time_limit_ms"]) / 1000
        self.stop_cell(
            CellStopped("TimeoutError", f"the cell ran longer than its time limit of {limit:g} s")
        )

    def on_timer(self, signum, frame):
        if not self.in_cell or self.stop is not None:
            return
        if self.in_protocol:
            self.timed_out = True
            return
        self.raise_timeout()

    def run_cell(self, code):
        started = time.monotonic()
        self.cells += 1
        self.answers.clear()
        self.host_calls = 0
        self.stop = None
        self.timed_out = False
        out = CapturedOutput(int(self.limits["max_captured_output_bytes"]))
        value = None
        error = None
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = out
        limit = int(self.limits["cell_time_limit_ms"]) / 1000
        try:
            signal.signal(signal.SIGALRM, self.on_timer)
            # Wall time of the cell, paused while it waits for host answers
            # (as the parent counts it).
            signal.setitimer(signal.ITIMER_REAL, limit)
            self.in_cell = True
            value = self.execute(code)
            self.in_cell = False
        except CellStopped as stop:
            error = stop
        except Disconnected:
            raise
        except BaseException as e:  # noqa: BLE001 - every Python error is the cell's result
            error = e
        finally:
            self.in_cell = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.settrace(None)
            sys.stdout, sys.stderr = saved
        self.reset_loop(error is not None)
        if self.stop is not None:
            error = self.stop
        ended_by_host = None
        max_bytes = int(self.limits["max_captured_output_bytes"])
        wire_error = None
        if isinstance(error, CellStopped):
            ended_by_host = error.ended_by_host
            if ended_by_host is None:
                wire_error = {
                    "exc_type": error.exc_type,
                    "message": cut_middle(error.message, max_bytes),
                    "line": None,
                }
        elif error is not None:
            wire_error = cell_error(error, max_bytes)
        stdout, chars = out.finish()
        return {
            "type": "cell_done",
            "stdout": stdout,
            "stdout_chars": chars,
            "value": None if value is None or error is not None else repr_within(value, max_bytes),
            "error": wire_error,
            "elapsed_us": int((time.monotonic() - started) * 1e6),
            "host_calls": self.host_calls,
            "ended_by_host": ended_by_host,
        }

    def reset_loop(self, failed):
        """Tasks a stopped cell left behind never run (they would wait for
        answers to calls of a finished cell): a failed cell's event loop is
        replaced by a new one."""
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending or failed or self.loop.is_running():
            old, self.loop = self.loop, asyncio.new_event_loop()
            try:
                old.close()
            except RuntimeError:
                pass

    def execute(self, code):
        tree = ast.parse(code, CELL_FILE, "exec")
        last_value = False
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body[-1]
            tree.body[-1] = ast.Assign(
                targets=[ast.Name(id="_rlm_cell_value", ctx=ast.Store())], value=last.value
            )
            ast.copy_location(tree.body[-1], last)
            ast.fix_missing_locations(tree)
            last_value = True
        compiled = compile(tree, CELL_FILE, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        if compiled.co_flags & inspect.CO_COROUTINE:
            self.loop.run_until_complete(eval(compiled, self.ns))
        else:
            exec(compiled, self.ns)
        return self.ns.pop("_rlm_cell_value", None) if last_value else None

    # ---- variables ---------------------------------------------------------

    def get_var(self, name):
        if not name.isidentifier() or name not in self.ns:
            return {"type": "var", "defined": False, "value": None}
        value = self.ns[name]
        what = f"variable {name}"
        try:
            size = string_size(value)
            if size > MAX_VALUE_BYTES:
                return {"type": "unsendable", "message": unsendable(what, "large", size)}
            return {"type": "var", "defined": True, "value": to_json(value)}
        except TooDeep:
            return {"type": "unsendable", "message": unsendable(what, "deep")}

    def serve(self):
        self.chan.send({"type": "hello", "monty_version": "CPython " + sys.version.split()[0]})
        while True:
            msg, blobs = self.chan.recv()
            if msg is None:
                return 0
            kind = msg.get("type")
            if kind == "start":
                try:
                    self.start(msg, blobs)
                except MemoryError:
                    return OOM_EXIT_CODE
                except Exception as e:  # noqa: BLE001 - reported to the parent
                    self.chan.send({"type": "fatal", "message": f"loading the inputs failed: {e}"})
                    return 3
                del blobs
                self.chan.send({"type": "started"})
            elif self.ns is None:
                return 0
            elif kind == "cell":
                result = self.run_cell(msg["code"])
                result["seq"] = int(msg.get("seq", 0))
                try:
                    self.chan.send(result)
                except (UnicodeEncodeError, ValueError):
                    # A lone surrogate in the output: send it escaped.
                    for key in ("stdout", "value"):
                        if isinstance(result[key], str):
                            result[key] = result[key].encode("utf-8", "backslashreplace").decode()
                    if result["error"]:
                        result["error"]["message"] = (
                            result["error"]["message"].encode("utf-8", "backslashreplace").decode()
                        )
                    self.chan.send(result)
            elif kind == "get_var":
                reply = self.get_var(msg["name"])
                try:
                    self.chan.send(reply)
                except (UnicodeEncodeError, ValueError) as e:
                    self.chan.send(
                        {"type": "unsendable", "message": f"variable {msg['name']} cannot be sent: {e}"}
                    )
            elif kind == "set_var":
                self.ns[msg["name"]] = msg["value"]
                self.chan.send({"type": "var_set"})
            elif kind == "host_result":
                pass  # a late answer for a call of a finished cell
            else:
                return 0


def blob_uses(spec):
    kind = spec["kind"]
    if kind == "text":
        return [spec["blob"]]
    if kind == "text_list":
        return list(spec["blobs"])
    if kind == "documents":
        return [d["text_blob"] for d in spec["docs"]]
    return []


def exception(exc_type, message):
    cls = getattr(builtins, exc_type, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = RuntimeError
    return cls(message)


def cell_error(e, max_bytes):
    line = None
    if isinstance(e, SyntaxError) and e.filename == CELL_FILE:
        line = e.lineno
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == CELL_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    try:
        message = str(e)
    except Exception:  # noqa: BLE001
        message = ""
    return {"exc_type": type(e).__name__, "message": cut_middle(message, max_bytes), "line": line}


def no_processes(*_args, **_kwargs):
    """os.system and os.popen run a shell, which the sandbox refuses to start:
    raise instead of returning the shell's exit status."""
    raise PermissionError(
        "the sandbox starts no processes (os.system, os.popen, subprocess): do the work in Python"
    )


# Threads a cell may run at once. Each one's host calls are tasks in the
# parent, and with the memory limit off nothing else stops thousands. The
# parent keeps the same bound on host calls waiting at once (MAX_CELL_THREADS):
# a cell can reach the functions this cap wraps.
MAX_THREADS = 64


def cap_threads():
    """Refuses a new thread while MAX_THREADS run (every way the standard
    library starts one goes through these functions). Counted here, at the
    start call: the interpreter's own count lags behind a fast loop."""
    import _thread
    import threading

    lock = _thread.allocate_lock()
    running = [0]

    def finished():
        with lock:
            running[0] -= 1

    def capped(start):
        def start_capped(function, *args, **kwargs):
            with lock:
                if running[0] >= MAX_THREADS:
                    raise RuntimeError(
                        f"the sandbox runs at most {MAX_THREADS} threads at once: "
                        "join some before starting more, or use asyncio.gather for many host calls"
                    )
                running[0] += 1

            def run(*a, **k):
                try:
                    return function(*a, **k)
                finally:
                    finished()

            try:
                return start(run, *args, **kwargs)
            except BaseException:
                finished()
                raise

        return start_capped

    for name in ("start_new_thread", "start_new", "start_joinable_thread"):
        if hasattr(_thread, name):
            setattr(_thread, name, capped(getattr(_thread, name)))
    for name in ("_start_new_thread", "_start_joinable_thread"):
        if hasattr(threading, name):
            setattr(threading, name, capped(getattr(threading, name)))


def main():
    os.system = no_processes
    os.popen = no_processes
    cap_threads()
    chan = Channel()
    try:
        return Worker(chan).serve()
    except (Disconnected, BrokenPipeError, EOFError):
        return 0
    except MemoryError:
        return OOM_EXIT_CODE


if __name__ == "__main__":
    os._exit(main())
