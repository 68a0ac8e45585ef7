"""Build post-pass of the neuron runner: make the interpreter snapshot's
objects immortal.

Usage: ``immortalize.py RUNNER.wasm`` (rewritten in place).

componentize-py snapshots the interpreter's linear memory into the
component's data segments. At that moment ``capsaga._lockdown`` lists the
address of every object alive (after ``IMMORTAL_MARKER``, in a bytes object
of the snapshot, with their CRC-32). This pass finds that list in the data
segments and sets each object's reference count, its first 4 bytes on
32-bit CPython, to 3.14's ``_Py_IMMORTAL_INITIAL_REFCNT`` for 32-bit builds (``5 << 28``;
immortal is ``>= 1 << 30``, PEP 683): the interpreter then never writes a
count to those objects, so a call no longer dirties their pages. It zeroes
the marker, so a second run finds nothing and fails.

Checked before each write: the count is that of a live, mortal object
(1 to ``1 << 30``) and the type pointer after it points inside the
snapshot; anything else fails the build (a layout other than the one
assumed here), as does a marker not found or an address outside the data
segments. The runner's test suite checks at run time that the objects are
immortal (``sys._is_immortal``).

The component binary format read here: a component's sections (id 1: a
core module, id 4: a nested component), a core module's data section (id
11) of segments with a constant ``i32.const`` offset. Only bytes inside
segments are rewritten, so every size and offset stays the same.
"""

import bisect
import struct
import sys
import zlib

MAGIC = b"CAPSAGA-IMMORTALIZE-1\0"
IMMORTAL = 5 << 28
IMMORTAL_MINIMUM = 1 << 30


def fail(msg):
    raise SystemExit(f"immortalize: {msg}")


def leb(b, i, signed=False):
    """The LEB128 number at b[i] (unsigned, or signed) and the offset after it."""
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            if signed and x & 0x40:
                r -= 1 << s
            return r, i


def sections(b, start, end):
    """(id, content start, content end) of each section of the module or
    component at b[start:end] (after its 8-byte preamble)."""
    i = start + 8
    while i < end:
        sid = b[i]
        size, j = leb(b, i + 1)
        yield sid, j, j + size
        i = j + size


def core_modules(b, start, end):
    for sid, s, e in sections(b, start, end):
        if sid == 1:
            yield s, e
        elif sid == 4:
            yield from core_modules(b, s, e)


def data_segments(b, start, end):
    """(memory offset, file offset, length) of each active segment."""
    out = []
    for sid, s, _ in sections(b, start, end):
        if sid != 11:
            continue
        n, k = leb(b, s)
        for _ in range(n):
            flags, k = leb(b, k)
            if flags == 1:  # passive
                ln, k = leb(b, k)
                k += ln
                continue
            if flags == 2:  # active, explicit memory
                _, k = leb(b, k)
            elif flags != 0:
                fail(f"data segment flags {flags} not understood")
            if b[k] != 0x41:
                fail("a data segment's offset is not an i32.const")
            off, k = leb(b, k + 1, signed=True)
            if b[k] != 0x0B:
                fail("a data segment's offset expression is longer than i32.const")
            ln, k = leb(b, k + 1)
            out.append((off, k, ln))
            k += ln
    return out


def find_list(b, segs):
    """File offset of the address list: the marker, a count, the addresses
    and their CRC-32, all in one segment (the marker's text also appears as
    a constant of the code that built it, with no list after it)."""
    for _, at, ln in segs:
        p = at
        while (p := b.find(MAGIC, p, at + ln)) >= 0:
            n = struct.unpack_from("<I", b, p + len(MAGIC))[0] if p + len(MAGIC) + 4 <= at + ln else 0
            start = p + len(MAGIC) + 4
            if 0 < n and start + 4 * n + 4 <= at + ln:
                crc = struct.unpack_from("<I", b, start + 4 * n)[0]
                if zlib.crc32(b[start : start + 4 * n]) == crc:
                    return p
            p += 1
    return None


def main(path):
    b = bytearray(open(path, "rb").read())
    for ms, me in core_modules(b, 0, len(b)):
        segs = data_segments(b, ms, me)
        p = find_list(b, segs)
        if p is None:
            continue
        segs.sort()
        starts = [o for o, _, _ in segs]
        lo, hi = starts[0], max(o + n for o, _, n in segs)

        def where(addr):
            """File offset of memory byte `addr`, None outside the segments
            (a zero byte: segments leave out runs of zeros)."""
            i = bisect.bisect_right(starts, addr) - 1
            if i >= 0 and addr < segs[i][0] + segs[i][2]:
                return segs[i][1] + addr - segs[i][0]
            return None

        def word(addr):
            return sum(
                (b[f] if (f := where(addr + k)) is not None else 0) << (8 * k) for k in range(4)
            )

        n = struct.unpack_from("<I", b, p + len(MAGIC))[0]
        addrs = struct.unpack_from(f"<{n}I", b, p + len(MAGIC) + 4)
        for addr in addrs:
            rc, ty = word(addr), word(addr + 4)
            if not 0 < rc < IMMORTAL_MINIMUM or not lo <= ty < hi:
                fail(f"object at {addr:#x}: count {rc}, type at {ty:#x}: not the layout assumed")
            f = where(addr)
            if f is None or where(addr + 3) != f + 3:
                fail(f"the count of the object at {addr:#x} is not inside one data segment")
            struct.pack_into("<I", b, f, IMMORTAL)
        b[p : p + len(MAGIC)] = bytes(len(MAGIC))
        open(path, "wb").write(b)
        print(f"immortalize: {n} objects of the snapshot made immortal", file=sys.stderr)
        return
    fail("no list of objects in the component (was it built from tools/neuron_runner/src?)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: immortalize.py RUNNER.wasm")
    main(sys.argv[1])
