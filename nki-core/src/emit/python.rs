//! The traced events of one kernel instance as NKI 0.8 Python: tensor names, views as
//! slices or `.ap()`, calls with keyword arguments, loops re-rolled ([`super::reroll`]), and
//! the module's text.

use super::reroll::{index_name, renumber, reroll, roll_repeats, Affine, Stmt, Tok};
use super::trace::{Arg, Call, Event, LoopKind, TensorId, View, What};
use crate::dtype::DType;
use crate::error::{ErrorKind, NkiError, Result, SourceLoc};
use crate::record::MemKind;
use std::collections::HashMap;

/// What the emitter knows of a tensor: its Python name, dims and memory.
#[derive(Clone, Debug)]
pub(crate) struct TensorInfo {
    /// The Python name.
    pub(crate) name: String,
    /// Its dimensions.
    pub(crate) dims: Vec<usize>,
    /// Its memory.
    pub(crate) mem: MemKind,
    /// Its index in the Python list `name`, for a tensor of an allocating site whose tiles
    /// are alive at once (a Rust `Vec` of tiles: `sb_12[3]`); `None` for a plain name.
    pub(crate) slot: Option<usize>,
}

impl TensorInfo {
    /// Appends the tensor's Python name (`sb_12`, or `sb_12[3]` with the index a number the
    /// re-roller may make affine).
    fn put(&self, line: &mut Line) {
        line.text(&self.name);
        if let Some(k) = self.slot {
            line.text("[").num(k as i64).text("]");
        }
    }
}

/// NKI 0.8's name of `dtype` (`nl.bfloat16`).
pub(crate) fn nl_dtype(dtype: DType) -> String {
    match dtype {
        DType::Bool => "nl.bool_".to_string(),
        d => format!("nl.{}", d.name()),
    }
}

/// The NKI 0.8 buffer of a tensor in `mem` (`shared` for shared HBM).
fn nl_buffer(mem: MemKind, shared: bool) -> &'static str {
    match (mem, shared) {
        (MemKind::Sbuf, _) => "nl.sbuf",
        (MemKind::Psum, _) => "nl.psum",
        (MemKind::Hbm, true) => "nl.shared_hbm",
        (MemKind::Hbm, false) => "nl.private_hbm",
    }
}

/// `(a, b, c)` of `dims` as Python.
pub(crate) fn tuple(dims: &[usize]) -> String {
    match dims {
        [one] => format!("({one},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// An emitter error naming the kernel line `loc`.
pub(crate) fn refuse(loc: SourceLoc, msg: String) -> NkiError {
    NkiError::new(
        ErrorKind::InvalidArgument,
        "emit",
        format!("{msg} (at {loc})"),
    )
}

/// Builds a statement from pieces of text and numbers (adjacent texts merged).
#[derive(Default)]
struct Line(Vec<Tok>);

impl Line {
    fn text(&mut self, s: &str) -> &mut Self {
        match self.0.last_mut() {
            Some(Tok::Text(t)) => t.push_str(s),
            _ => self.0.push(Tok::Text(s.to_string())),
        }
        self
    }

    fn num(&mut self, n: i64) -> &mut Self {
        self.0.push(Tok::Num(Affine::constant(n)));
        self
    }
}

/// Names the tensors of `events`: parameters and outputs by `named`; tiles after the line
/// that allocates them. Tiles of one allocating site that are alive at once (a Rust `Vec` of
/// tiles) are the entries of a Python list named after the site (`sb_112[0]`, `sb_112[1]`);
/// an entry is reused once its tile is dead. Returns every tensor's info and the lists
/// (name, length), in order of first allocation.
#[allow(clippy::type_complexity)]
pub(crate) fn name_tensors(
    events: &[Event],
    named: &HashMap<TensorId, TensorInfo>,
) -> Result<(HashMap<TensorId, TensorInfo>, Vec<(String, usize)>)> {
    let mut out = named.clone();
    // The last event using each tensor.
    let mut last_use: HashMap<TensorId, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let What::Call(c) = &e.what {
            for (_, a) in &c.args {
                if let Arg::View(v) = a {
                    last_use.insert(v.tensor, i);
                }
            }
        }
    }
    // Per allocating site (in order of first allocation), its base name and the end of each
    // list entry's current tensor; per tensor, its site and entry.
    let mut sites: Vec<(String, Vec<usize>)> = Vec::new();
    let mut site_of: HashMap<(&'static str, u32, u32), usize> = HashMap::new();
    let mut slots: Vec<(TensorId, usize, usize, Vec<usize>, MemKind)> = Vec::new();
    let mut taken: std::collections::HashSet<String> =
        named.values().map(|t| t.name.clone()).collect();
    for (i, e) in events.iter().enumerate() {
        let (tensor, mem, dims) = match &e.what {
            What::Alloc {
                tensor, mem, dims, ..
            } => (tensor, mem, dims),
            What::Call(Call {
                returns: Some((tensor, mem, dims)),
                ..
            }) => (tensor, mem, dims),
            _ => continue,
        };
        if out.contains_key(tensor) {
            continue;
        }
        let end = last_use.get(tensor).copied().unwrap_or(i);
        let site = *site_of
            .entry((e.loc.file, e.loc.line, e.loc.column))
            .or_insert_with(|| {
                let prefix = match mem {
                    MemKind::Sbuf => "sb",
                    MemKind::Psum => "ps",
                    MemKind::Hbm => "hbm",
                };
                let mut base = format!("{prefix}_{}", e.loc.line);
                let mut n = 1;
                while taken.contains(&base) {
                    base = format!("{prefix}_{}_{n}", e.loc.line);
                    n += 1;
                }
                taken.insert(base.clone());
                sites.push((base, Vec::new()));
                sites.len() - 1
            });
        let ends = &mut sites[site].1;
        let k = match ends.iter().position(|&until| until < i) {
            Some(k) => {
                ends[k] = end;
                k
            }
            None => {
                ends.push(end);
                ends.len() - 1
            }
        };
        slots.push((*tensor, site, k, dims.clone(), *mem));
    }
    for (tensor, site, k, dims, mem) in slots {
        let (base, ends) = &sites[site];
        out.insert(
            tensor,
            TensorInfo {
                name: base.clone(),
                dims,
                mem,
                slot: (ends.len() > 1).then_some(k),
            },
        );
    }
    let lists = sites
        .into_iter()
        .filter(|(_, ends)| ends.len() > 1)
        .map(|(base, ends)| (base, ends.len()))
        .collect();
    Ok((out, lists))
}

/// Appends the Python of view `v` (a slice of its tensor, the bare name for the whole
/// tensor, or `.ap(pattern=.., offset=..)`).
fn view(line: &mut Line, v: &View, info: &TensorInfo, loc: SourceLoc) -> Result<()> {
    if let Some(why) = v.unprintable {
        return Err(refuse(
            loc,
            format!("the emitter cannot print {why} of '{}' yet", info.name),
        ));
    }
    let dims = &info.dims;
    let mut strides = vec![1usize; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    let shape = v.ap.shape.dims();
    if let Some(parts) = slice_of(&v.ap, dims, &strides) {
        info.put(line);
        if parts.iter().any(|p| p.is_some()) {
            line.text("[");
            for (d, p) in parts.iter().enumerate() {
                if d > 0 {
                    line.text(", ");
                }
                match p {
                    None => {
                        line.text(":");
                    }
                    Some((start, end, step)) => {
                        line.num(*start).text(":").num(*end);
                        if *step > 1 {
                            line.text(&format!(":{step}"));
                        }
                    }
                }
            }
            line.text("]");
        }
        return Ok(());
    }
    // An access pattern: [step, count] pairs; on chip the first is in partitions.
    let per_partition: usize = strides.first().copied().unwrap_or(1);
    let mut pattern = Vec::new();
    for (d, &n) in shape.iter().enumerate() {
        let mut st = v.ap.strides[d];
        if d == 0 && info.mem != MemKind::Hbm {
            if per_partition == 0 || st % per_partition as isize != 0 {
                return Err(refuse(
                    loc,
                    format!(
                        "the emitter cannot print a view of '{}' whose first dimension does not \
                         step over whole partitions",
                        info.name
                    ),
                ));
            }
            st /= per_partition as isize;
        }
        pattern.push(format!("[{st}, {n}]"));
    }
    info.put(line);
    line.text(&format!(".ap(pattern=[{}], offset=", pattern.join(", ")))
        .num(v.ap.offset as i64)
        .text(")");
    Ok(())
}

/// The view as a basic slice of a tensor of `dims` (row-major `strides`): per dimension
/// `None` for the whole of it or `(start, end, step)`; `None` when the view is no slice.
#[allow(clippy::type_complexity)]
fn slice_of(
    ap: &crate::access::Ap,
    dims: &[usize],
    strides: &[usize],
) -> Option<Vec<Option<(i64, i64, usize)>>> {
    let shape = ap.shape.dims();
    if shape.len() != dims.len() {
        return None;
    }
    let mut rest = ap.offset;
    let mut parts = Vec::new();
    for d in 0..dims.len() {
        let start = rest / strides[d];
        rest -= start * strides[d];
        let n = shape[d];
        let step = if n <= 1 {
            1
        } else {
            let st = ap.strides[d];
            if st <= 0 || !(st as usize).is_multiple_of(strides[d]) {
                return None;
            }
            st as usize / strides[d]
        };
        if start >= dims[d] || start + (n.max(1) - 1) * step >= dims[d] {
            return None;
        }
        if start == 0 && n == dims[d] && step == 1 {
            parts.push(None);
        } else {
            let end = start + (n.max(1) - 1) * step + 1;
            parts.push(Some((start as i64, end as i64, step)));
        }
    }
    (rest == 0).then_some(parts)
}

/// Appends argument `a`.
fn arg(
    line: &mut Line,
    a: &Arg,
    tensors: &HashMap<TensorId, TensorInfo>,
    loc: SourceLoc,
) -> Result<()> {
    match a {
        Arg::View(v) => {
            let info = tensors.get(&v.tensor).ok_or_else(|| {
                refuse(
                    loc,
                    "an operand is a tensor the kernel neither takes as a parameter nor \
                     allocates with nl.ndarray (a Beta-1 tile, or a kernel input not given to \
                     the emitter)"
                        .to_string(),
                )
            })?;
            view(line, v, info, loc)?;
        }
        // A number: iterations (or the cores of an LNC=2 launch) whose integers differ
        // affinely re-roll into one statement over the index.
        Arg::Int(i) => {
            line.num(*i);
        }
        Arg::Float(f) => {
            line.text(&float(*f));
        }
        Arg::Bool(b) => {
            line.text(if *b { "True" } else { "False" });
        }
        Arg::Const(c) => {
            line.text(c);
        }
    }
    Ok(())
}

/// A float as Python source.
fn float(f: f64) -> String {
    if f.is_nan() {
        "float('nan')".to_string()
    } else if f.is_infinite() {
        if f > 0.0 {
            "float('inf')"
        } else {
            "-float('inf')"
        }
        .to_string()
    } else {
        format!("{f:?}")
    }
}

/// The statement of one event (`None` for loop events).
fn statement(e: &Event, tensors: &HashMap<TensorId, TensorInfo>) -> Result<Option<Vec<Tok>>> {
    let mut line = Line::default();
    match &e.what {
        What::Loop { .. } => return Ok(None),
        What::Untraced { api } => {
            return Err(refuse(
                e.loc,
                format!("the emitter does not write '{api}' as NKI 0.8 yet"),
            ))
        }
        What::Alloc {
            tensor,
            mem,
            shared,
            dtype,
            dims,
            ..
        } => {
            tensors[tensor].put(&mut line);
            line.text(&format!(
                " = nl.ndarray({}, dtype={}, buffer={})",
                tuple(dims),
                nl_dtype(*dtype),
                nl_buffer(*mem, *shared)
            ));
        }
        What::Call(c) => {
            if let Some((tensor, ..)) = &c.returns {
                tensors[tensor].put(&mut line);
                line.text(" = ");
            }
            line.text(c.api).text("(");
            for (k, (kw, a)) in c.args.iter().enumerate() {
                if k > 0 {
                    line.text(", ");
                }
                line.text(kw).text("=");
                arg(&mut line, a, tensors, e.loc)?;
            }
            line.text(")");
        }
    }
    Ok(Some(line.0))
}

/// The kernel body of one instance's `events`: statements with the recorded loops re-rolled,
/// then the host loops found from repeated statements, each loop index named after its
/// nesting level.
pub(crate) fn body(events: &[Event], tensors: &HashMap<TensorId, TensorInfo>) -> Result<Vec<Stmt>> {
    let mut loops: HashMap<u32, (u64, LoopKind)> = HashMap::new();
    let mut lines = Vec::new();
    for e in events {
        if let What::Loop {
            activation,
            trips,
            kind,
        } = &e.what
        {
            loops.insert(*activation, (*trips, *kind));
        }
        if let Some(toks) = statement(e, tensors)? {
            lines.push((e.frames.as_slice(), toks));
        }
    }
    let framed = nest(&lines, 0, &loops);
    // Fresh indices start above every frame depth (a frame depth is below the event count).
    let mut fresh = events.len() + 1;
    let rolled = roll_repeats(framed, &mut fresh);
    Ok(renumber(rolled, 0, &mut Vec::new()))
}

/// A statement with the loop frames it was traced in.
type FramedLine<'a> = (&'a [(u32, u32)], Vec<Tok>);

/// The statements of `lines` (each with its loop frames) at loop depth `depth`.
fn nest(lines: &[FramedLine], depth: usize, loops: &HashMap<u32, (u64, LoopKind)>) -> Vec<Stmt> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let frames = lines[i].0;
        if frames.len() <= depth {
            out.push(Stmt::Line(lines[i].1.clone()));
            i += 1;
            continue;
        }
        let act = frames[depth].0;
        let inside = |l: &FramedLine| l.0.len() > depth && l.0[depth].0 == act;
        let j = lines[i..]
            .iter()
            .position(|l| !inside(l))
            .map_or(lines.len(), |k| i + k);
        let (trips, kind) = loops.get(&act).copied().unwrap_or((0, LoopKind::Affine));
        let observed = lines[i..j]
            .iter()
            .map(|l| l.0[depth].1 as u64 + 1)
            .max()
            .unwrap_or(0);
        let mut bodies: Vec<Vec<Stmt>> = vec![Vec::new(); trips.max(observed) as usize];
        let mut a = i;
        while a < j {
            let it = lines[a].0[depth].1;
            let b = lines[a..j]
                .iter()
                .position(|l| l.0[depth].1 != it)
                .map_or(j, |k| a + k);
            bodies[it as usize].extend(nest(&lines[a..b], depth + 1, loops));
            a = b;
        }
        out.extend(reroll(bodies, kind.api(), depth));
        i = j;
    }
    out
}

/// Appends the Python source of `stmts` at indentation `level` to `out`.
pub(crate) fn render(stmts: &[Stmt], level: usize, out: &mut String) {
    let pad = "    ".repeat(level);
    for s in stmts {
        match s {
            Stmt::Line(toks) => {
                out.push_str(&pad);
                for t in toks {
                    match t {
                        Tok::Text(s) => out.push_str(s),
                        Tok::Num(a) => out.push_str(&a.python()),
                    }
                }
                out.push('\n');
            }
            Stmt::Loop {
                api,
                trips,
                depth,
                body,
            } => {
                out.push_str(&format!("{pad}for i{depth} in {api}({trips}):\n"));
                render(body, level + 1, out);
            }
            Stmt::Cases { depth, arms } => {
                for (k, (end, body)) in arms.iter().enumerate() {
                    let head = match k {
                        0 => format!("if {} < {end}:", index_name(*depth)),
                        k if k + 1 == arms.len() => "else:".to_string(),
                        _ => format!("elif {} < {end}:", index_name(*depth)),
                    };
                    out.push_str(&format!("{pad}{head}\n"));
                    if body.is_empty() {
                        out.push_str(&format!("{pad}    pass\n"));
                    }
                    render(body, level + 1, out);
                }
            }
        }
    }
}
