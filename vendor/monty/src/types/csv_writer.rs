//! rlm patch: the objects `csv.writer()` and `csv.DictWriter()` return.
//!
//! A writer formats rows as CPython's `_csv.c` does (`join_append_data`:
//! minimal quoting on the delimiter, the quote character and the line
//! terminator's characters, doubled quotes, escape characters, the quoted
//! single empty field) and writes each line to an `io.StringIO` or to
//! `sys.stdout` (the targets a sandbox without files has).

use std::fmt::Write;

use super::{LazyHeapSet, PyTrait, Type};
use crate::{
    args::ArgValues,
    bytecode::{CallResult, VM},
    defer_drop,
    exception_private::{ExcType, ExcTypeExt, RunError, RunResult, SimpleException},
    heap::{DropWithContext, HeapId, HeapItem, HeapObjectRead, HeapReadOutput},
    intern::StaticStrings,
    modules::csv::Dialect,
    value::{EitherStr, Value},
};

const QUOTE_ALL: i64 = 1;
const QUOTE_NONNUMERIC: i64 = 2;
const QUOTE_NONE: i64 = 3;

/// A `_csv.writer` (or, with field names, a `csv.DictWriter`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CsvWriter {
    /// Owned reference to the `io.StringIO` written to; `None`: `sys.stdout`.
    target: Option<HeapId>,
    dialect: Dialect,
    /// `DictWriter`: the field names (owned values), `restval` and whether
    /// keys outside the field names raise.
    dict: Option<DictFields>,
}

/// What a `DictWriter` adds to a writer.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct DictFields {
    pub(crate) fieldnames: Vec<Value>,
    pub(crate) restval: Value,
    pub(crate) extras_raise: bool,
}

impl CsvWriter {
    /// A writer to `target` (which it holds a reference to).
    pub(crate) fn new(target: Option<HeapId>, dialect: Dialect, dict: Option<DictFields>) -> Self {
        Self { target, dialect, dict }
    }

    /// Calls `on_child` for every heap reference the writer holds.
    pub(crate) fn for_each_child_id(&self, mut on_child: impl FnMut(HeapId)) {
        if let Some(id) = self.target {
            on_child(id);
        }
        if let Some(d) = &self.dict {
            for v in d.fieldnames.iter().chain(std::iter::once(&d.restval)) {
                if let Value::Ref(id) = v {
                    on_child(*id);
                }
            }
        }
    }
}

/// One row as a line (with the line terminator), CPython's quoting rules.
fn format_row(d: &Dialect, fields: &[Value], vm: &mut VM<'_>) -> RunResult<String> {
    let mut line = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            line.push(d.delimiter);
        }
        let numeric = matches!(field, Value::Int(_) | Value::Float(_) | Value::Bool(_))
            || matches!(field.read_heap(vm), Some(HeapReadOutput::LongInt(_)));
        let mut quoted = match d.quoting {
            QUOTE_NONNUMERIC => !numeric,
            QUOTE_ALL => true,
            _ => false,
        };
        let text = if matches!(field, Value::None) {
            String::new()
        } else {
            let s = field.py_str(vm)?;
            defer_drop!(s, vm);
            s.to_str(vm)?.to_owned()
        };
        let mut body = String::with_capacity(text.len());
        for c in text.chars() {
            let special = c == d.delimiter
                || Some(c) == d.escapechar
                || Some(c) == d.quotechar
                || d.lineterminator.contains(c);
            if special {
                let mut want_escape = false;
                if d.quoting == QUOTE_NONE {
                    want_escape = true;
                } else {
                    if Some(c) == d.quotechar {
                        if d.doublequote {
                            body.push(c);
                        } else {
                            want_escape = true;
                        }
                    } else if Some(c) == d.escapechar {
                        want_escape = true;
                    }
                    if !want_escape {
                        quoted = true;
                    }
                }
                if want_escape {
                    let Some(escape) = d.escapechar else {
                        return Err(csv_error("need to escape, but no escapechar set"));
                    };
                    body.push(escape);
                }
            }
            body.push(c);
        }
        // A row of one empty field is written as "" (else it reads as no field).
        if fields.len() == 1 && text.is_empty() {
            if d.quoting == QUOTE_NONE {
                return Err(csv_error("single empty field record must be quoted"));
            }
            quoted = true;
        }
        if quoted {
            let q = d.quotechar.unwrap_or('"');
            line.push(q);
            line.push_str(&body);
            line.push(q);
        } else {
            line.push_str(&body);
        }
    }
    line.push_str(&d.lineterminator);
    Ok(line)
}

fn csv_error(message: &str) -> RunError {
    SimpleException::new_msg(ExcType::ValueError, message).into()
}

fn type_error(message: String) -> RunError {
    SimpleException::new_msg(ExcType::TypeError, message).into()
}

/// Writes `line` where the writer writes; the number of characters written.
fn emit(target: Option<HeapId>, line: &str, vm: &mut VM<'_>) -> RunResult<usize> {
    match target {
        None => vm.print_writer.stdout_write(line.into())?,
        Some(id) => {
            vm.heap.tracker.check_allocation(line.len())?;
            match vm.heap.read(id) {
                HeapReadOutput::StringIo(mut stream) => {
                    let stream = stream.get_mut(vm.heap);
                    stream.ensure_open()?;
                    stream.write(line);
                }
                _ => unreachable!("a csv writer writes to a StringIO"),
            }
        }
    }
    Ok(line.chars().count())
}

/// The fields of one row: any iterable (CPython: "iterable expected").
fn row_fields(row: &Value, vm: &mut VM<'_>) -> RunResult<Vec<Value>> {
    if !row.py_is_iterable(vm) {
        return Err(csv_error(&format!("iterable expected, not {}", row.py_type_name(vm))));
    }
    crate::types::iter::collect_iterable(row, vm)
}

impl<'h> HeapObjectRead<'h, CsvWriter> {
    /// Formats and writes one row of values.
    fn write_values(&self, fields: Vec<Value>, vm: &mut VM<'h>) -> RunResult<usize> {
        let dialect = self.get(vm.heap).dialect.clone();
        let line = format_row(&dialect, &fields, vm);
        for f in fields {
            f.drop_with(vm);
        }
        let line = line?;
        let target = self.get(vm.heap).target;
        emit(target, &line, vm)
    }

    /// `writerow(row)`: a sequence, or (`DictWriter`) a dict.
    fn writerow(&self, row: &Value, vm: &mut VM<'h>) -> RunResult<usize> {
        let has_dict = self.get(vm.heap).dict.is_some();
        let fields = if has_dict {
            self.dict_row(row, vm)?
        } else {
            row_fields(row, vm)?
        };
        self.write_values(fields, vm)
    }

    /// `DictWriter`: the row's values in field-name order.
    fn dict_row(&self, row: &Value, vm: &mut VM<'h>) -> RunResult<Vec<Value>> {
        let Some(HeapReadOutput::Dict(dict)) = row.read_heap(vm) else {
            return Err(type_error(format!(
                "DictWriter.writerow() needs a dict, not '{}'",
                row.py_type_name(vm)
            )));
        };
        let (names, restval, extras_raise) = {
            let d = self.get(vm.heap).dict.as_ref().expect("a DictWriter");
            let names: Vec<Value> = d.fieldnames.iter().map(|v| v.clone_with_heap(vm.heap)).collect();
            (names, d.restval.clone_with_heap(vm.heap), d.extras_raise)
        };
        defer_drop!(names, vm);
        defer_drop!(restval, vm);
        if extras_raise {
            let keys: Vec<Value> = dict.get(vm.heap).iter().map(|(k, _)| k.clone_with_heap(vm.heap)).collect();
            defer_drop!(keys, vm);
            let mut wrong = Vec::new();
            for k in keys.iter() {
                let mut known = false;
                for n in names.iter() {
                    if k.py_eq(n, vm)? {
                        known = true;
                        break;
                    }
                }
                if !known {
                    let r = k.py_repr(vm)?;
                    defer_drop!(r, vm);
                    wrong.push(r.to_str(vm)?.to_owned());
                }
            }
            if !wrong.is_empty() {
                return Err(csv_error(&format!(
                    "dict contains fields not in fieldnames: {}",
                    wrong.join(", ")
                )));
            }
        }
        let mut out = Vec::with_capacity(names.len());
        for n in names.iter() {
            match dict.dict_get(n, vm) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => out.push(restval.clone_with_heap(vm.heap)),
                Err(e) => {
                    for v in out {
                        v.drop_with(vm);
                    }
                    return Err(e);
                }
            }
        }
        Ok(out)
    }
}

impl<'h> PyTrait<'h> for HeapObjectRead<'h, CsvWriter> {
    fn py_type(&self, _vm: &VM<'h>) -> Type {
        Type::CsvWriter
    }

    fn py_len(&self, _vm: &VM<'h>) -> Option<usize> {
        None
    }

    fn py_eq_impl(&self, _other: &Value, _vm: &mut VM<'h>) -> RunResult<Option<bool>> {
        Ok(None)
    }

    fn py_bool(&self, _vm: &mut VM<'h>) -> RunResult<bool> {
        Ok(true)
    }

    fn py_repr_fmt(&self, f: &mut impl Write, _vm: &mut VM<'h>, _heap_ids: &mut LazyHeapSet) -> RunResult<()> {
        Ok(write!(f, "<_csv.writer object at 0x{:x}>", self.id().index())?)
    }

    fn py_call_attr(&mut self, vm: &mut VM<'h>, attr: &EitherStr, args: ArgValues) -> RunResult<CallResult> {
        let method = attr.static_string();
        let value = match method {
            Some(StaticStrings::Writerow) => {
                let row = args.get_one_arg("writerow", vm.heap)?;
                defer_drop!(row, vm);
                Value::Int(self.writerow(row, vm)? as i64)
            }
            Some(StaticStrings::Writerows) => {
                let rows = args.get_one_arg("writerows", vm.heap)?;
                defer_drop!(rows, vm);
                let rows = row_fields(rows, vm)?;
                defer_drop!(rows, vm);
                for row in rows.iter() {
                    self.writerow(row, vm)?;
                }
                Value::None
            }
            Some(StaticStrings::Writeheader) if self.get(vm.heap).dict.is_some() => {
                args.check_zero_args("writeheader", vm.heap)?;
                let names: Vec<Value> = {
                    let d = self.get(vm.heap).dict.as_ref().expect("a DictWriter");
                    d.fieldnames.iter().map(|v| v.clone_with_heap(vm.heap)).collect()
                };
                Value::Int(self.write_values(names, vm)? as i64)
            }
            _ => {
                args.drop_with(vm);
                return Err(ExcType::attribute_error(Type::CsvWriter, attr.as_str(vm.interns)));
            }
        };
        Ok(CallResult::Value(value))
    }
}

impl HeapItem for CsvWriter {
    fn py_dec_ref_ids(&mut self, stack: &mut Vec<HeapId>) {
        if let Some(id) = self.target.take() {
            stack.push(id);
        }
        if let Some(d) = &mut self.dict {
            for v in &mut d.fieldnames {
                v.py_dec_ref_ids(stack);
            }
            d.restval.py_dec_ref_ids(stack);
        }
    }
}
