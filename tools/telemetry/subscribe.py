#!/usr/bin/python3
"""Prints live numbers from a Switchyard engine's telemetry stream once a second.

A complete third-party client in one file: it decodes every topic with `struct` exactly as
docs/telemetry-protocol.md describes (ZeroMQ SUB, frames [topic][32-byte header][payload]).
Needs pyzmq (Debian: python3-zmq, so run it with /usr/bin/python3).

    /usr/bin/python3 tools/telemetry/subscribe.py --endpoint tcp://127.0.0.1:5555
    /usr/bin/python3 tools/telemetry/subscribe.py --endpoint tcp://gpu-host:5555 --keys ~/.switchyard/keys
"""
import argparse
import collections
import json
import os
import struct
import sys
import time

import zmq

MAGIC = 0x31545953  # "SYT1"
SCHEMA_VERSION = 1
HEADER = struct.Struct("<IHHIIQQ")  # magic, schema_version, record_size, record_count, flags, sequence, run_id
RECORDS = {
    # start_ns end_ns tokens device block index microbatch peer lane kind stall_reason reserved
    "spans": struct.Struct("<qqqiiiiiBBBB"),
    # t_ns depth_tokens oldest_age_ns device block index layer reserved[3]
    "queues": struct.Struct("<qqqiiiB3x"),
    # window_start_ns window_end_ns tokens block expert device reserved
    "expert_load": struct.Struct("<qqqiiii"),
    # t_ns request_id tokens_in tokens_out rank phase reserved[3]
    "requests": struct.Struct("<qqiiiB3x"),
}
JSON_TOPICS = ("control", "summary", "meta")
LANE_COMPUTE = 0
KIND_STALL = 6
LAYER_KINDS = ("attention", "expert", "sampler")
PHASE_FINISHED = 3


def read_key(path, field):
    """The value of `field = "..."` in a Switchyard key file."""
    with open(path, encoding="ascii") as f:
        for line in f:
            name, _, value = line.partition("=")
            if name.strip() == field:
                return value.strip().strip('"')
    sys.exit(f"{path}: no '{field}' key")


class Interval:
    """What arrived since the last printed line."""

    def __init__(self):
        self.busy_ns = collections.Counter()  # device -> compute time, stalls excluded
        self.t_min = None
        self.t_max = None
        self.deepest = None  # (depth, device, layer, block, index)
        self.expert_tokens = collections.Counter()  # (block, expert) -> tokens
        self.finished = 0
        self.messages = 0


class Client:
    def __init__(self):
        self.next_seq = {}  # topic -> sequence expected next, within run_id
        self.run_id = None
        self.lost = 0
        self.decode_errors = 0
        self.messages = 0
        self.devices = {}  # index -> name, from meta
        self.summary = None  # last summary object
        self.now = Interval()

    def device_name(self, index):
        return self.devices.get(index, f"device{index}")

    def handle(self, frames):
        self.messages += 1
        self.now.messages += 1
        if len(frames) != 3 or len(frames[1]) != HEADER.size:
            self.decode_errors += 1
            return
        topic = frames[0].decode("ascii", "replace")
        payload = frames[2]
        magic, version, size, count, _flags, seq, run_id = HEADER.unpack(frames[1])
        if magic != MAGIC or not 1 <= version <= SCHEMA_VERSION:
            self.decode_errors += 1
            return
        # Sequences count per topic from 0 within one run; a new run id starts them afresh.
        if run_id != self.run_id:
            self.run_id, self.next_seq = run_id, {}
        if topic in self.next_seq and seq > self.next_seq[topic]:
            self.lost += seq - self.next_seq[topic]
        self.next_seq[topic] = seq + 1

        if topic in RECORDS:
            rec = RECORDS[topic]
            if size != rec.size or len(payload) != count * rec.size:
                self.decode_errors += 1
                return
            getattr(self, "on_" + topic)(rec.iter_unpack(payload))
        elif topic in JSON_TOPICS:
            try:
                objects = json.loads(payload.decode("utf-8"))
            except ValueError:
                self.decode_errors += 1
                return
            for obj in objects:
                getattr(self, "on_" + topic)(obj)
        else:
            self.decode_errors += 1

    def on_spans(self, records):
        now = self.now
        for start, end, _tokens, device, _block, _index, _mb, _peer, lane, kind, _reason, _ in records:
            now.t_min = start if now.t_min is None else min(now.t_min, start)
            now.t_max = end if now.t_max is None else max(now.t_max, end)
            if lane == LANE_COMPUTE and kind != KIND_STALL:
                now.busy_ns[device] += end - start

    def on_queues(self, records):
        for _t, depth, _age, device, block, index, layer in records:
            if self.now.deepest is None or depth > self.now.deepest[0]:
                self.now.deepest = (depth, device, layer, block, index)

    def on_expert_load(self, records):
        for _t0, _t1, tokens, block, expert, _device, _ in records:
            self.now.expert_tokens[(block, expert)] += tokens

    def on_requests(self, records):
        for _t, _id, _tin, _tout, _rank, phase in records:
            if phase == PHASE_FINISHED:
                self.now.finished += 1

    def on_control(self, obj):
        status = "ok" if obj.get("ok") else f"error: {obj.get('error')}"
        print(f"control: {obj.get('cmd')} {status}", flush=True)

    def on_summary(self, obj):
        self.summary = obj

    def on_meta(self, obj):
        for d in obj.get("devices") or []:
            if isinstance(d, dict) and "index" in d:
                self.devices[d["index"]] = d.get("name", f"device{d['index']}")

    def line(self):
        now, parts = self.now, []
        run = f"{self.run_id:016x}" if self.run_id is not None else "-"
        parts.append(f"[run {run}]")
        s = self.summary or {}
        tps = s.get("tokens_per_s")
        parts.append(f"tokens/s {tps:.1f}" if isinstance(tps, (int, float)) else "tokens/s -")
        itl = s.get("itl_ms") or {}
        if isinstance(itl.get("p50"), (int, float)) and isinstance(itl.get("p99"), (int, float)):
            parts.append(f"ITL p50 {itl['p50']:.2f} ms p99 {itl['p99']:.2f} ms")
        else:
            parts.append("ITL -")
        if now.busy_ns and now.t_max is not None and now.t_max > now.t_min:
            device, busy = now.busy_ns.most_common(1)[0]
            parts.append(f"busiest {self.device_name(device)} {100.0 * busy / (now.t_max - now.t_min):.0f}%")
        else:
            parts.append("busiest -")
        if now.deepest is not None:
            depth, device, layer, block, index = now.deepest
            kind = LAYER_KINDS[layer] if layer < len(LAYER_KINDS) else "?"
            parts.append(f"deepest queue {self.device_name(device)} b{block} {kind} {index}: {depth} tokens")
        else:
            parts.append("deepest queue -")
        if now.expert_tokens:
            (block, expert), tokens = now.expert_tokens.most_common(1)[0]
            parts.append(f"hottest expert b{block}/e{expert}: {tokens} tokens")
        else:
            parts.append("hottest expert -")
        parts.append(f"finished {now.finished}")
        parts.append(f"msgs {now.messages} lost {self.lost}")
        if self.decode_errors:
            parts.append(f"decode errors {self.decode_errors}")
        self.now = Interval()
        return " | ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--endpoint", default="tcp://127.0.0.1:5555", help="the engine's --telemetry endpoint")
    parser.add_argument("--keys", help="key directory with server.pub and CLIENT.key (CURVE)")
    parser.add_argument("--client", default="client", help="client key name in --keys (default: client)")
    parser.add_argument("--duration", type=float, default=0, help="stop after this many seconds (0: run until Ctrl-C)")
    args = parser.parse_args()

    ctx = zmq.Context()
    sock = ctx.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 10000)
    if args.keys:
        sock.curve_serverkey = read_key(os.path.join(args.keys, "server.pub"), "public").encode()
        client_key = os.path.join(args.keys, args.client + ".key")
        sock.curve_publickey = read_key(client_key, "public").encode()
        sock.curve_secretkey = read_key(client_key, "secret").encode()
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.connect(args.endpoint)

    client = Client()
    start = time.monotonic()
    next_print = start + 1.0
    try:
        while True:
            now = time.monotonic()
            if args.duration and now - start >= args.duration:
                break
            if sock.poll(max(0, int((next_print - now) * 1000))):
                while True:
                    try:
                        client.handle(sock.recv_multipart(zmq.NOBLOCK))
                    except zmq.Again:
                        break
            if time.monotonic() >= next_print:
                print(client.line(), flush=True)
                next_print += 1.0
    except KeyboardInterrupt:
        pass
    print(f"done: {client.messages} messages, {client.lost} lost, {client.decode_errors} decode errors", flush=True)
    sock.close()
    ctx.term()


if __name__ == "__main__":
    main()
