"""The memory part of the run report (issue 30; the device's figures, issue 38): each function
row's ``memory`` and ``donation``, the report's ``memory`` section, its text, and the JAX801/JAX802
confirmations. What the hooks recorded is in :mod:`.memory`; nothing here imports JAX."""

from __future__ import annotations

from typing import Optional

from .memory import DEFAULT_DONATION_THRESHOLD, FIELDS, Memory, _at, device_memory, donation_candidates, footprint


def device_figures(steps, key) -> dict:
    """What the device showed of one function's calls (``steps``: the collector's
    :class:`.steploops.StepLog`): ``in_flight`` (the most earlier calls of it still computing at
    one of its dispatches), ``device_memory`` (whether the device reports memory statistics) and
    ``device_peak_rise`` (how much its ``peak_bytes_in_use`` rose from before the function's first
    call to after its first :data:`.steps.PEAK_CALLS` calls; None where not measured)."""
    if steps is None:
        return {"in_flight": None, "in_flight_plain": None, "own_per_call": None, "device_memory": None,
                "device_peak_rise": None, "in_use_during_calls": None, "device_peak": None}
    before, after = steps.peak_before.get(key), steps.peak_after.get(key)
    rise = after - before if before is not None and after is not None else None
    on = bool(steps.device_memory)
    depth = steps.in_flight.get(key)
    plain, own = steps.in_flight_plain.get(key, (None, None))
    if plain is not None and depth is not None:
        plain = max(float(depth), round(plain, 1))
    return {"in_flight": depth, "in_flight_plain": plain, "own_per_call": own, "device_memory": steps.device_memory,
            "device_peak_rise": rise if on else None,
            "in_use_during_calls": steps.in_use_after.get(key) if on else None,
            "device_peak": steps.peak_end if on else None}


def function_keys(memory: Memory, rec, threshold: int = DEFAULT_DONATION_THRESHOLD, steps=None) -> dict:
    """A function row's ``memory`` (one entry per compile, XLA's figures; and what the device
    showed: :func:`device_figures`) and ``donation``."""
    compiles = []
    for m in memory.programs.get(rec.key, ()):
        total, exact = footprint(m)
        compiles.append({**m, "footprint": total, "footprint_exact": exact})
    largest = max(compiles, key=lambda m: m["footprint"]) if compiles else None
    device = device_figures(steps, rec.key)
    donation = donation_candidates(memory, rec.key)
    if donation is not None:
        donation.update(device)
        donation["compiled_saving"] = donation["bytes"]
        depth = _plain_depth(device)
        donation["device_saving"] = ((depth + 1) * donation["bytes"]
                                     if device["device_memory"] and depth is not None else None)
        donation["figure"] = "device" if donation["device_saving"] is not None else "compiled"
        donation["peak_in_calls"], donation["device_peak_saving"] = _peak_saving(donation, device, largest)
        headline = donation["device_saving"] if donation["figure"] == "device" else donation["bytes"]
        donation["shown"] = headline >= threshold
        donation["fix"] = donation_fix(rec.name, donation)
    mem = {"compiles": compiles, "largest": largest, **device} if compiles else None
    return {"memory": mem, "donation": donation}


def _plain_depth(device: dict) -> Optional[int]:
    """The in-flight depth the advice counts: the one estimated without jaxlint's own time where
    there is one (:class:`.steploops.Stretch`), else the one measured under jaxlint."""
    depth, plain = device.get("in_flight"), device.get("in_flight_plain")
    if depth is None or plain is None:
        return depth
    return max(depth, int(round(plain)))


def _peak_saving(d: dict, device: dict, largest: Optional[dict]) -> tuple:
    """(whether the device's peak was reached while the function's calls ran, how much donating
    would lower it). The peak is the run's ``peak_bytes_in_use``; while the calls ran, the device
    held at most the bytes read right after one of its dispatches plus that call's temporaries
    (XLA's figure). When that is less than the peak, the peak came from elsewhere in the run, and
    donating frees memory while the calls run without lowering it: 0."""
    saving, peak, during = d["device_saving"], device.get("device_peak"), device.get("in_use_during_calls")
    if saving is None or peak is None or during is None:
        return None, saving
    reach = during + (largest["temp"] if largest else 0)
    if reach < peak:
        return False, 0
    return True, saving


def donation_fix(name: str, d: dict) -> str:
    """The advice: the figure the device measured where it reports memory (the in-flight depth x
    the bytes not donated), with XLA's compiled figure beside it, each labelled; elsewhere XLA's
    compiled figure, labelled."""
    from .sizes import format_size

    opts = []
    if d["argnums"]:
        opts.append(f"donate_argnums={tuple(d['argnums'])!r}")
    if d["argnames"]:
        opts.append(f"donate_argnames={tuple(d['argnames'])!r}")
    what = ", ".join(f"`{n}`" for n in d["names"])
    one = len(d["names"]) == 1
    head = (f"`{d['wrapper']}({name}, {', '.join(opts)})`: {what} come{'s' if one else ''} back as "
            f"{'its result' if one else 'its results'} on every call and {'is' if one else 'are'} not donated; ")
    size = format_size(d["bytes"])
    if d.get("device_saving") is not None:
        measured, depth = d["in_flight"], _plain_depth(d)
        copies = f"{depth + 1} × {size}"
        flight = (f"up to {measured} earlier call{'s' if measured != 1 else ''} were still computing at a dispatch "
                  "under jaxlint (measured)" if measured else "")
        if depth != measured:
            flight += (f"; without jaxlint's own {d['own_per_call'] * 1e6:.0f} µs in each of its calls, about {depth} "
                       "(estimated from the device's rate on them)")
        flight += ", each holding its own copy, so " if depth else ""
        rise = d.get("device_peak_rise")
        seen = (f"; the device's peak_bytes_in_use rose {format_size(rise)} over its first calls, measured"
                if rise is not None else "")
        if d.get("peak_in_calls") is False:
            return (head + f"on the device {flight}donating would free about {copies} = "
                    f"{format_size(d['device_saving'])} while its calls run (estimated from the in-flight "
                    f"depth{seen}), but not lower this run's peak: the device's peak, {format_size(d['device_peak'])}, "
                    f"was reached outside its calls (at most {format_size(d['in_use_during_calls'])} in use right "
                    f"after its dispatches, measured); XLA's compiled peak of one call drops {size} (XLA's figure). "
                    "Read nothing donated after the call")
        return (head + f"on the device {flight}donating would lower the device's peak by about {copies} = "
                f"{format_size(d['device_saving'])} (estimated from the in-flight depth{seen}); XLA's "
                f"compiled peak of one call drops {size} (XLA's figure). Read nothing donated after the call")
    why = ("this device reports no memory statistics, so the device's peak was not measured"
           if d.get("device_memory") is False else "the device's peak was not measured")
    return (head + f"donating lets XLA write the results into {'its' if one else 'their'} buffers: XLA's compiled "
            f"peak of one call drops {size} (XLA's figure; {why}). Read nothing donated after the call")


def section(collector, functions: list, threshold: int = DEFAULT_DONATION_THRESHOLD) -> dict:
    """The report's ``memory`` object; ``functions`` are the report's function rows (with the
    keys of :func:`function_keys`)."""
    m = collector.memory
    programs = []
    for f in functions:
        largest = (f.get("memory") or {}).get("largest")
        if largest is None:
            continue
        programs.append({"function": f["qualname"], "file": f["file"], "line": f["line"],
                         "compiles": len(f["memory"]["compiles"]), **{k: largest[k] for k in (*FIELDS, "peak")},
                         "footprint": largest["footprint"], "footprint_exact": largest["footprint_exact"],
                         "in_flight": f["memory"].get("in_flight"), "in_flight_plain": f["memory"].get("in_flight_plain"),
                         "device_peak_rise": f["memory"].get("device_peak_rise")})
    programs.sort(key=lambda p: (-p["temp"], -p["footprint"], p["function"]))
    donation = [{"function": f["qualname"], "file": f["file"], "line": f["line"], **f["donation"]}
                for f in functions if f.get("donation")]
    donation.sort(key=lambda d: -(d.get("device_saving") or d["bytes"]))
    names = {r.key: (r.qualname, r.file, r.line) for r in collector.records.values()}
    unusable = []
    for (key, file, line), (n, text) in sorted(m.unusable.items(), key=lambda kv: -kv[1][0]):
        q, f, l = names.get(key, (None, None, None))
        unusable.append({"function": q, "function_file": f, "function_line": l, "file": file, "line": line,
                         "count": n, "arguments": text})
    return {"programs": programs, "donation": donation, "donation_threshold": threshold,
            "donation_unusable": unusable, "settings": list(m.settings),
            "distributed_initialize": list(m.initialize), "jax_imported_at": _at(m.jax_imported_at),
            "backend_started_at": _at(m.backend_started_at), "device": device_memory()}


def text_lines(report: dict, where, max_rows: int = 20) -> list:
    """The text report's memory sections (an empty list when the run had nothing to say)."""
    from .sizes import format_size as b

    mem = report.get("memory")
    if not mem:
        return []
    lines = ["", "Memory of each compiled program (largest temporaries first; XLA's figures, per function: "
                 "its largest compile)"]
    if not mem["programs"]:
        lines.append("  none recorded")
    else:
        device = any(p.get("device_peak_rise") is not None for p in mem["programs"])
        lines.append(f"  {'temp':>9} {'arguments':>9} {'outputs':>9} {'aliased':>9} {'peak':>10}"
                     + (f" {'device':>10}" if device else "") + "  function")
        for p in mem["programs"][:max_rows]:
            peak = b(p["footprint"]) if p["footprint_exact"] else "≤" + b(p["footprint"])
            rise = p.get("device_peak_rise")
            dev = (f" {b(rise) if rise is not None else '-':>10}" if device else "")
            lines.append(f"  {b(p['temp']):>9} {b(p['argument']):>9} {b(p['output']):>9} {b(p['alias']):>9} "
                         f"{peak:>10}{dev}  {p['function']} at {where(p['file'], p['line'])}"
                         + (f" ({p['compiles']} compiles)" if p["compiles"] > 1 else ""))
        if any(not p["footprint_exact"] for p in mem["programs"]):
            lines.append("  ≤: this jaxlib reports no peak; arguments + outputs + temporaries − aliased, an upper bound")
        if device:
            lines.append("  device: how much the device's own peak (peak_bytes_in_use, measured) rose over the "
                         "function's first calls, with every call it had in flight")
        if len(mem["programs"]) > max_rows:
            lines.append(f"  … {len(mem['programs']) - max_rows} more functions (see --format json)")
    shown = [d for d in mem["donation"] if d["shown"]]
    if shown or mem["donation_unusable"]:
        lines.append("")
        lines.append("Donation")
        for d in shown[:max_rows]:
            if d.get("device_saving") is not None:
                what = (f"{b(d['bytes'])} not donated, about {b(d['device_saving'])} at the device's peak "
                        f"({_plain_depth(d) + 1} copies)")
            else:
                what = f"{b(d['bytes'])} not donated (XLA's compiled figure)"
            lines.append(f"  {d['function']} at {where(d['file'], d['line'])}: {what}")
            lines.append(f"      fix: {d['fix']}")
        for u in mem["donation_unusable"][:max_rows]:
            fn = f"{u['function']} " if u["function"] else ""
            lines.append(f"  donated but not usable ({u['count']}×), {fn}called at {where(u['file'], u['line'])}: "
                         f"{u['arguments']} (no output of the same shape and dtype to write into: nothing saved)")
    hidden = len(mem["donation"]) - len(shown)
    if hidden:
        lines.append(f"  {hidden} smaller donation candidate(s) under {b(mem['donation_threshold'])} "
                     "(see --format json)")
    order = [s for s in mem["settings"]] + [dict(i, name="jax.distributed.initialize()") for i in
                                             mem["distributed_initialize"]]
    if order:
        lines.append("")
        lines.append("Set-up order")
        for s in order:
            at = where(s["file"], s["line"])
            if "read" not in s:
                if s["late"]:
                    start = s.get("backend_started_at")
                    lines.append(f"  {s['name']} at {at} came after the backend started"
                                 + (f" at {where(start['file'], start['line'])}" if start else ""))
                else:
                    lines.append(f"  {s['name']} at {at}: in time (before the backend started)")
            elif s["effective"]:
                lines.append(f"  {s['name']} set at {at}: in time (the backend had not started)")
            else:
                read = s.get("read_at")
                when = ("JAX read it at `import jax`" if s["read"] == "import" else "the backend had started")
                if read:
                    when += f" ({where(read['file'], read['line'])})"
                lines.append(f"  {s['name']} set at {at} had no effect: {when}")
    dev = mem.get("device") or {}
    if dev.get("available"):
        lines.append("")
        lines.append("Device memory")
        for d in dev["devices"]:
            parts = [f"{k.replace('_', ' ')} {b(d[k])}" for k in ("peak_bytes_in_use", "bytes_limit") if d.get(k) is not None]
            lines.append(f"  {d['device']}: " + ", ".join(parts))
    elif dev:
        lines.append(f"Device memory: not available ({dev.get('why')})")
    return lines


def confirm_setup(memory: Memory, file: str, line: int, real, where) -> tuple:
    """(confirmed, evidence) for a JAX801/JAX802 finding on ``file:line`` (real paths)."""
    for s in memory.settings:
        if real(s["file"]) == file and s["line"] == line:
            if s["effective"]:
                return False, f"{s['name']} was set here before JAX read it (in time on this run)"
            read = s.get("read_at")
            at = f" ({where(read['file'], read['line'])})" if read else ""
            return True, (f"{s['name']} was set here after JAX read it"
                          + (f" at `import jax`{at}" if s["read"] == "import" else f": the backend started first{at}"))
    for i in memory.initialize:
        if real(i["file"]) == file and i["line"] == line:
            if not i["late"]:
                return False, "jax.distributed.initialize ran here before the backend started (in time on this run)"
            at = i.get("backend_started_at")
            return True, ("jax.distributed.initialize ran here after the backend started"
                          + (f" at {where(at['file'], at['line'])}" if at else ""))
    return False, "not observed: this line did not run while jax was imported"
