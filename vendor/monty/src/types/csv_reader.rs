//! rlm patch: the objects `csv.reader()` and `csv.DictReader()` return.
//!
//! The rows are parsed when the reader is made (see [`crate::modules::csv`]);
//! the reader iterates over them and keeps what CPython's readers expose:
//! `line_num` (the source lines read up to the row last returned) and, for a
//! `DictReader`, `fieldnames`.

use std::fmt::Write;

use super::{LazyHeapSet, PyTrait, Type};
use crate::{
    bytecode::{CallResult, VM},
    exception_private::{ExcType, ExcTypeExt, RunResult},
    heap::{HeapData, HeapId, HeapItem, HeapObjectRead},
    intern::StaticStrings,
    value::{EitherStr, Value},
};

/// A `_csv.reader`, or a `csv.DictReader` when it has field names.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct CsvReader {
    /// Owned reference to the list of rows (lists, or dicts for a `DictReader`).
    rows: HeapId,
    /// Index of the next row.
    index: usize,
    /// For each row, the number of source lines read when it was complete.
    line_nums: Vec<u64>,
    /// `line_num`: that number for the row last returned.
    line_num: u64,
    /// `DictReader.fieldnames` (owned); `None` for a plain reader.
    fieldnames: Option<Value>,
}

impl CsvReader {
    /// A reader over `rows` (a list it owns a reference to).
    pub(crate) fn new(rows: HeapId, line_nums: Vec<u64>, fieldnames: Option<Value>) -> Self {
        Self {
            rows,
            index: 0,
            line_nums,
            line_num: 0,
            fieldnames,
        }
    }

    /// Calls `on_child` for every heap reference the reader holds.
    pub(crate) fn for_each_child_id(&self, mut on_child: impl FnMut(HeapId)) {
        on_child(self.rows);
        if let Some(Value::Ref(id)) = &self.fieldnames {
            on_child(*id);
        }
    }

    /// `_csv.reader`, or `csv.DictReader` with field names.
    pub(crate) fn type_(&self) -> Type {
        if self.fieldnames.is_some() {
            Type::CsvDictReader
        } else {
            Type::CsvReader
        }
    }
}

impl<'h> PyTrait<'h> for HeapObjectRead<'h, CsvReader> {
    fn py_type(&self, vm: &VM<'h>) -> Type {
        self.get(vm.heap).type_()
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

    fn py_repr_fmt(&self, f: &mut impl Write, vm: &mut VM<'h>, _heap_ids: &mut LazyHeapSet) -> RunResult<()> {
        let name = if self.get(vm.heap).fieldnames.is_some() {
            "csv.DictReader"
        } else {
            "_csv.reader"
        };
        Ok(write!(f, "<{name} object at 0x{:x}>", self.id().index())?)
    }

    fn py_is_iterator(&self, _: &VM<'h>) -> bool {
        true
    }

    fn py_is_iterable(&self, _vm: &VM<'h>) -> bool {
        true
    }

    fn py_iter(&self, vm: &mut VM<'h>) -> RunResult<Value> {
        Ok(self.clone_value(vm.heap))
    }

    fn py_next(&mut self, vm: &mut VM<'h>) -> RunResult<Option<Value>> {
        let (rows, index) = {
            let r = self.get(vm.heap);
            (r.rows, r.index)
        };
        let item = match vm.heap.get(rows) {
            HeapData::List(list) => list.as_slice().get(index).map(|v| v.clone_with_heap(vm.heap)),
            _ => unreachable!("a csv reader holds a list of rows"),
        };
        if item.is_some() {
            let r = self.get_mut(vm.heap);
            r.line_num = r.line_nums.get(index).copied().unwrap_or(r.line_num);
            r.index += 1;
        }
        Ok(item)
    }

    fn py_getattr(&self, attr: &EitherStr, vm: &mut VM<'h>) -> RunResult<Option<CallResult>> {
        let r = self.get(vm.heap);
        let value = match attr.static_string() {
            Some(StaticStrings::LineNum) => Value::Int(r.line_num as i64),
            Some(StaticStrings::Fieldnames) if r.fieldnames.is_some() => match &r.fieldnames {
                Some(v) => v.clone_with_heap(vm.heap),
                None => Value::None,
            },
            _ => return Err(ExcType::attribute_error(r.type_(), attr.as_str(vm.interns))),
        };
        Ok(Some(CallResult::Value(value)))
    }
}

impl HeapItem for CsvReader {
    fn py_dec_ref_ids(&mut self, stack: &mut Vec<HeapId>) {
        stack.push(self.rows);
        if let Some(v) = &mut self.fieldnames {
            v.py_dec_ref_ids(stack);
        }
    }
}
