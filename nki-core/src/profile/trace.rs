//! The timeline as Chrome / Perfetto trace-event JSON: one process per rank, one
//! thread (track) per unit of each LNC program, so DMA and collectives get tracks
//! of their own; each instruction is a complete ("X") event in microseconds.

use super::record::Unit;
use super::schedule::Timeline;
use crate::io::json;

/// The track id of `unit` of LNC program `program`.
fn track(program: usize, unit: Unit) -> usize {
    program * Unit::ALL.len() + Unit::ALL.iter().position(|&u| u == unit).unwrap_or(0)
}

fn metadata(name: &str, pid: usize, tid: Option<usize>, value: &str) -> String {
    let mut members = vec![("name", json::string(name)), ("ph", json::string("M")), ("pid", pid.to_string())];
    if let Some(tid) = tid {
        members.push(("tid", tid.to_string()));
    }
    members.push(("args", json::object([("name", json::string(value))])));
    json::object(members)
}

/// The trace of `timeline` (`{"traceEvents": [...], "displayTimeUnit": "ns"}`).
pub fn trace_json(timeline: &Timeline) -> String {
    let mut events = Vec::new();
    let mut ranks: Vec<usize> = timeline.streams.iter().map(|s| s.0).collect();
    ranks.dedup();
    for r in ranks {
        events.push(metadata("process_name", r, None, &format!("rank {r}")));
    }
    for (si, &(rank, program)) in timeline.streams.iter().enumerate() {
        for u in Unit::ALL.iter().filter(|&&u| timeline.slices[si].iter().any(|s| s.unit == u)) {
            events.push(metadata("thread_name", rank, Some(track(program, *u)), &format!("lnc{program} {}", u.name())));
        }
        for s in &timeline.slices[si] {
            let mut args = vec![("index", s.index.to_string())];
            if s.cost.flops > 0.0 {
                args.push(("flops", json::number(s.cost.flops)));
            }
            if s.cost.bytes > 0.0 {
                args.push(("bytes", json::number(s.cost.bytes)));
            }
            events.push(json::object([
                ("name", json::string(s.op)),
                ("cat", json::string(s.unit.name())),
                ("ph", json::string("X")),
                ("pid", rank.to_string()),
                ("tid", track(program, s.unit).to_string()),
                ("ts", json::number(s.start_ns * 1e-3)),
                ("dur", json::number((s.end_ns - s.start_ns) * 1e-3)),
                ("args", json::object(args)),
            ]));
        }
    }
    json::object([("traceEvents", json::array(events)), ("displayTimeUnit", json::string("ns"))])
}
