//! rlm patch: `io.StringIO`, an in-memory text stream.
//!
//! Holds its text and a position (a byte offset on a character boundary; the
//! Python-visible position, `tell()` and `seek()`, counts characters as in
//! CPython). Reading: `read`, `readline`, `readlines`, iteration line by line
//! (what `csv.reader(io.StringIO(text))` consumes), `getvalue`. Writing:
//! `write` (overwrites from the position, as CPython does), `writelines`,
//! `truncate`. `seek`, `tell`, `close`, `closed`, `with`. Newline translation
//! (`newline=` other than the default) is not done.

use std::fmt::Write;

use super::{LazyHeapSet, List, PyTrait, Type, str::allocate_string};
use crate::{
    args::{ArgValues, FromArgs},
    bytecode::{CallResult, VM},
    defer_drop,
    exception_private::{ExcType, ExcTypeExt, RunError, RunResult, SimpleException},
    heap::{DropWithContext, HeapData, HeapId, HeapItem, HeapObjectRead},
    intern::StaticStrings,
    value::{EitherStr, Value},
};

/// An `io.StringIO` object.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct StringIo {
    text: String,
    /// Byte offset of the position, always on a character boundary.
    pos: usize,
    closed: bool,
}

#[derive(FromArgs)]
#[from_args(name = "StringIO", style = c_named)]
struct StringIoArgs {
    #[from_args(default = Value::None)]
    initial_value: Value,
    #[from_args(default = Value::None)]
    newline: Value,
}

impl StringIo {
    /// A stream holding `text`, positioned at its start.
    pub(crate) fn new(text: String) -> Self {
        Self {
            text,
            pos: 0,
            closed: false,
        }
    }

    /// `io.StringIO(initial_value='', newline='\n')`.
    pub(crate) fn init(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
        let StringIoArgs { initial_value, newline } = StringIoArgs::from_args(args, vm)?;
        defer_drop!(initial_value, vm);
        defer_drop!(newline, vm);
        let text = match initial_value {
            Value::None => String::new(),
            v => match v.to_str(vm) {
                Ok(s) => s.to_owned(),
                Err(_) => {
                    let msg = format!("initial_value must be str or None, not {}", v.py_type_name(vm));
                    return Err(SimpleException::new_msg(ExcType::TypeError, msg).into());
                }
            },
        };
        vm.heap.tracker.check_allocation(text.len())?;
        Ok(Value::Ref(vm.heap.allocate(HeapData::StringIo(Box::new(Self::new(text))))))
    }

    pub(crate) fn ensure_open(&self) -> RunResult<()> {
        if self.closed {
            Err(SimpleException::new_msg(ExcType::ValueError, "I/O operation on closed file").into())
        } else {
            Ok(())
        }
    }

    /// Up to `size` characters from the position (all when `None`).
    fn read(&mut self, size: Option<usize>) -> &str {
        let start = self.pos.min(self.text.len());
        let rest = &self.text[start..];
        let end = match size {
            None => rest.len(),
            Some(n) => rest.char_indices().nth(n).map_or(rest.len(), |(i, _)| i),
        };
        self.pos = start + end;
        &self.text[start..start + end]
    }

    /// The next line, with its `\n` (empty at the end).
    fn readline(&mut self, size: Option<usize>) -> &str {
        let start = self.pos.min(self.text.len());
        let rest = &self.text[start..];
        let mut end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        if let Some(n) = size
            && let Some((i, _)) = rest[..end].char_indices().nth(n)
        {
            end = i;
        }
        self.pos = start + end;
        &self.text[start..start + end]
    }

    /// Writes `s` at the position, overwriting what is there.
    pub(crate) fn write(&mut self, s: &str) {
        if self.pos > self.text.len() {
            // A seek past the end: CPython pads with NULs.
            let pad = self.pos - self.text.len();
            self.text.extend(std::iter::repeat_n('\0', pad));
        }
        if self.pos == self.text.len() {
            self.text.push_str(s);
        } else {
            let rest = &self.text[self.pos..];
            let n = s.chars().count();
            let end = self.pos + rest.char_indices().nth(n).map_or(rest.len(), |(i, _)| i);
            self.text.replace_range(self.pos..end, s);
        }
        self.pos += s.len();
    }

    /// The position in characters.
    fn tell(&self) -> usize {
        let within = self.pos.min(self.text.len());
        self.text[..within].chars().count() + (self.pos - within)
    }

    /// The byte offset of character `n` (past the end: the excess in bytes,
    /// which `write` pads).
    fn byte_offset(&self, n: usize) -> usize {
        match self.text.char_indices().nth(n) {
            Some((i, _)) => i,
            None => self.text.len() + (n - self.text.chars().count()),
        }
    }
}

fn optional_size(v: Option<Value>, vm: &mut VM<'_>, name: &str) -> RunResult<Option<usize>> {
    let Some(v) = v else { return Ok(None) };
    defer_drop!(v, vm);
    match v {
        Value::None => Ok(None),
        Value::Int(i) if *i < 0 => Ok(None),
        Value::Int(i) => Ok(Some(*i as usize)),
        Value::Bool(b) => Ok(Some(usize::from(*b))),
        other => {
            let msg = format!(
                "{name}() argument must be int or None, not {}",
                other.py_type_name(vm)
            );
            Err(SimpleException::new_msg(ExcType::TypeError, msg).into())
        }
    }
}

fn type_error(msg: String) -> RunError {
    SimpleException::new_msg(ExcType::TypeError, msg).into()
}

impl<'h> PyTrait<'h> for HeapObjectRead<'h, StringIo> {
    fn py_type(&self, _vm: &VM<'h>) -> Type {
        Type::StringIo
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
        Ok(write!(f, "<_io.StringIO object at 0x{:x}>", self.id().index())?)
    }

    fn py_is_iterator(&self, _: &VM<'h>) -> bool {
        true
    }

    fn py_is_iterable(&self, _vm: &VM<'h>) -> bool {
        true
    }

    fn py_iter(&self, vm: &mut VM<'h>) -> RunResult<Value> {
        self.get(vm.heap).ensure_open()?;
        Ok(self.clone_value(vm.heap))
    }

    fn py_next(&mut self, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        self.get(vm.heap).ensure_open()?;
        let line = self.get_mut(vm.heap).readline(None).to_owned();
        if line.is_empty() {
            return Ok(None);
        }
        Ok(Some(allocate_string(line, vm.heap)))
    }

    fn py_is_context_manager(&self, _vm: &VM<'h>) -> bool {
        true
    }

    fn py_enter(&mut self, vm: &mut VM<'h>) -> RunResult<CallResult> {
        self.get(vm.heap).ensure_open()?;
        Ok(CallResult::Value(self.clone_value(vm.heap)))
    }

    fn py_exit(&mut self, vm: &mut VM<'h>, _exc: Option<HeapId>) -> RunResult<CallResult> {
        self.get_mut(vm.heap).closed = true;
        Ok(CallResult::Value(Value::None))
    }

    fn py_getattr(&self, attr: &EitherStr, vm: &mut VM<'h>) -> RunResult<Option<CallResult>> {
        if attr.static_string() == Some(StaticStrings::Closed) {
            return Ok(Some(CallResult::Value(Value::Bool(self.get(vm.heap).closed))));
        }
        Err(ExcType::attribute_error(Type::StringIo, attr.as_str(vm.interns)))
    }

    fn py_call_attr(&mut self, vm: &mut VM<'h>, attr: &EitherStr, args: ArgValues) -> RunResult<CallResult> {
        let Some(method) = attr.static_string() else {
            args.drop_with(vm);
            return Err(ExcType::attribute_error(Type::StringIo, attr.as_str(vm.interns)));
        };
        if method == StaticStrings::Close {
            args.check_zero_args("close", vm.heap)?;
            self.get_mut(vm.heap).closed = true;
            return Ok(CallResult::Value(Value::None));
        }
        if let Err(e) = self.get(vm.heap).ensure_open() {
            args.drop_with(vm);
            return Err(e);
        }
        let value = match method {
            StaticStrings::Read => {
                let size = optional_size(args.get_zero_one_arg("read", vm.heap)?, vm, "read")?;
                let s = self.get_mut(vm.heap).read(size).to_owned();
                allocate_string(s, vm.heap)
            }
            StaticStrings::Readline => {
                let size = optional_size(args.get_zero_one_arg("readline", vm.heap)?, vm, "readline")?;
                let s = self.get_mut(vm.heap).readline(size).to_owned();
                allocate_string(s, vm.heap)
            }
            StaticStrings::Readlines => {
                let hint = optional_size(args.get_zero_one_arg("readlines", vm.heap)?, vm, "readlines")?;
                let mut lines = Vec::new();
                let mut total = 0usize;
                loop {
                    let line = self.get_mut(vm.heap).readline(None).to_owned();
                    if line.is_empty() {
                        break;
                    }
                    total += line.chars().count();
                    lines.push(allocate_string(line, vm.heap));
                    if hint.is_some_and(|h| h > 0 && total >= h) {
                        break;
                    }
                }
                Value::Ref(vm.heap.allocate(HeapData::List(List::new(lines))))
            }
            StaticStrings::Getvalue => {
                args.check_zero_args("getvalue", vm.heap)?;
                let s = self.get(vm.heap).text.clone();
                allocate_string(s, vm.heap)
            }
            StaticStrings::Write => {
                let s = args.get_one_arg("write", vm.heap)?;
                defer_drop!(s, vm);
                let text = match s.to_str(vm) {
                    Ok(t) => t.to_owned(),
                    Err(_) => {
                        return Err(type_error(format!(
                            "string argument expected, got '{}'",
                            s.py_type_name(vm)
                        )));
                    }
                };
                vm.heap.tracker.check_allocation(text.len())?;
                let n = text.chars().count();
                self.get_mut(vm.heap).write(&text);
                Value::Int(n as i64)
            }
            StaticStrings::Tell => {
                args.check_zero_args("tell", vm.heap)?;
                Value::Int(self.get(vm.heap).tell() as i64)
            }
            StaticStrings::Seek => {
                let (pos, whence) = args.get_one_two_args("seek", vm.heap)?;
                defer_drop!(pos, vm);
                let whence = match whence {
                    None => 0,
                    Some(Value::Int(w)) => w,
                    Some(other) => {
                        other.drop_with(vm);
                        return Err(type_error("seek() whence must be an int".to_owned()));
                    }
                };
                let Value::Int(pos) = *pos else {
                    return Err(type_error(format!(
                        "'{}' object cannot be interpreted as an integer",
                        pos.py_type_name(vm)
                    )));
                };
                let stream = self.get_mut(vm.heap);
                let target = match whence {
                    0 if pos < 0 => {
                        return Err(SimpleException::new_msg(
                            ExcType::ValueError,
                            format!("Negative seek position {pos}"),
                        )
                        .into());
                    }
                    0 => stream.byte_offset(pos as usize),
                    1 | 2 if pos != 0 => {
                        return Err(SimpleException::new_msg(
                            ExcType::OSError,
                            "Can't do nonzero cur-relative seeks",
                        )
                        .into());
                    }
                    1 => stream.pos,
                    2 => stream.text.len(),
                    w => {
                        return Err(SimpleException::new_msg(
                            ExcType::ValueError,
                            format!("Invalid whence ({w}, should be 0, 1 or 2)"),
                        )
                        .into());
                    }
                };
                stream.pos = target;
                Value::Int(stream.tell() as i64)
            }
            StaticStrings::Truncate => {
                let size = optional_size(args.get_zero_one_arg("truncate", vm.heap)?, vm, "truncate")?;
                let stream = self.get_mut(vm.heap);
                let cut = match size {
                    Some(n) => stream.byte_offset(n).min(stream.text.len()),
                    None => stream.pos.min(stream.text.len()),
                };
                stream.text.truncate(cut);
                Value::Int(stream.text[..cut].chars().count() as i64)
            }
            StaticStrings::Readable | StaticStrings::Writable | StaticStrings::Seekable => {
                args.check_zero_args(method.into(), vm.heap)?;
                Value::Bool(true)
            }
            StaticStrings::Flush => {
                args.check_zero_args("flush", vm.heap)?;
                Value::None
            }
            _ => {
                args.drop_with(vm);
                return Err(ExcType::attribute_error(Type::StringIo, attr.as_str(vm.interns)));
            }
        };
        Ok(CallResult::Value(value))
    }
}

impl HeapItem for StringIo {
    fn py_dec_ref_ids(&mut self, _stack: &mut Vec<HeapId>) {
        // Text only: no heap references.
    }
}
