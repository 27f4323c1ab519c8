//! rlm patch: the `csv` module's readers.
//!
//! rlm patch: the `csv` module.
//!
//! `csv.reader(lines, dialect='excel', **fmtparams)` and
//! `csv.DictReader(lines, fieldnames=None, restkey=None, restval=None, ...)`
//! over any iterable of strings (an `io.StringIO`, `text.splitlines()`, a
//! list), with the parser of CPython's `_csv.c` (the same states, so quoted
//! fields across lines, doubled quotes, escape characters, `skipinitialspace`,
//! `QUOTE_NONNUMERIC` and `strict` behave alike); `csv.writer(f, ...)` and
//! `csv.DictWriter(f, fieldnames, restval='', extrasaction='raise', ...)` to
//! an `io.StringIO` or `sys.stdout` (see [`crate::types::csv_writer`]);
//! `csv.field_size_limit()` and the `QUOTE_*` constants.
//!
//! Differences from CPython: the input is read and parsed when the reader is
//! created (the reader, [`crate::types::csv_reader`], then iterates over the
//! rows; `line_num` and `DictReader.fieldnames` are kept); `csv.Error` is
//! `ValueError`; dialects are the names `excel`, `excel-tab` and `unix` (no
//! `register_dialect`, no `Sniffer`); writers write to an `io.StringIO` or
//! `sys.stdout` only.

use crate::{
    args::{ArgValues, FromArgs},
    bytecode::VM,
    defer_drop,
    exception_private::{ExcType, RunError, RunResult, SimpleException},
    heap::{HeapData, HeapId},
    intern::StaticStrings,
    modules::ModuleFunctions,
    types::{
        Dict, List, Module, PyTrait,
        csv_reader::CsvReader,
        csv_writer::{CsvWriter, DictFields},
        str::allocate_string,
    },
    value::Value,
};

const QUOTE_MINIMAL: i64 = 0;
const QUOTE_ALL: i64 = 1;
const QUOTE_NONNUMERIC: i64 = 2;
const QUOTE_NONE: i64 = 3;

/// `csv` module functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::Display, serde::Serialize, serde::Deserialize)]
pub(crate) enum CsvFunctions {
    #[strum(serialize = "reader")]
    Reader,
    #[strum(serialize = "DictReader")]
    DictReader,
    #[strum(serialize = "field_size_limit")]
    FieldSizeLimit,
    #[strum(serialize = "writer")]
    Writer,
    #[strum(serialize = "DictWriter")]
    DictWriter,
}

/// Creates the `csv` module on the heap.
pub fn create_module(vm: &mut VM<'_>) -> HeapId {
    let mut module = Module::new(StaticStrings::Csv);
    for (name, func) in [
        (StaticStrings::Reader, CsvFunctions::Reader),
        (StaticStrings::DictReader, CsvFunctions::DictReader),
        (StaticStrings::FieldSizeLimit, CsvFunctions::FieldSizeLimit),
        (StaticStrings::Writer, CsvFunctions::Writer),
        (StaticStrings::DictWriter, CsvFunctions::DictWriter),
    ] {
        module.set_attr(name, Value::ModuleFunction(ModuleFunctions::Csv(func)), vm);
    }
    for (name, value) in [
        (StaticStrings::QuoteMinimal, QUOTE_MINIMAL),
        (StaticStrings::QuoteAll, QUOTE_ALL),
        (StaticStrings::QuoteNonnumeric, QUOTE_NONNUMERIC),
        (StaticStrings::QuoteNone, QUOTE_NONE),
    ] {
        module.set_attr(name, Value::Int(value), vm);
    }
    module.set_attr(
        StaticStrings::ErrorClass,
        Value::Builtin(crate::builtins::Builtins::ExcType(ExcType::ValueError)),
        vm,
    );
    vm.heap.allocate(HeapData::Module(Box::new(module)))
}

/// Dispatches a call to a `csv` module function.
pub(super) fn call(vm: &mut VM<'_>, function: CsvFunctions, args: ArgValues) -> RunResult<Value> {
    match function {
        CsvFunctions::Reader => reader(vm, args),
        CsvFunctions::DictReader => dict_reader(vm, args),
        CsvFunctions::FieldSizeLimit => field_size_limit(vm, args),
        CsvFunctions::Writer => writer(vm, args),
        CsvFunctions::DictWriter => dict_writer(vm, args),
    }
}

fn csv_error(message: impl Into<String>) -> RunError {
    SimpleException::new_msg(ExcType::ValueError, message.into()).into()
}

fn type_error(message: impl Into<String>) -> RunError {
    SimpleException::new_msg(ExcType::TypeError, message.into()).into()
}

/// `csv.field_size_limit([new_limit])`: returns the old limit.
fn field_size_limit(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let new = args.get_zero_one_arg("field_size_limit", vm.heap)?;
    let old = vm.heap.module_state.csv_field_limit;
    if let Some(v) = new {
        defer_drop!(v, vm);
        let Value::Int(limit) = v else {
            return Err(type_error("limit must be an integer"));
        };
        vm.heap.module_state.csv_field_limit = *limit;
    }
    Ok(Value::Int(old))
}

/// A dialect: how fields are delimited and quoted.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Dialect {
    pub(crate) delimiter: char,
    pub(crate) quotechar: Option<char>,
    pub(crate) escapechar: Option<char>,
    pub(crate) doublequote: bool,
    pub(crate) skipinitialspace: bool,
    pub(crate) lineterminator: String,
    pub(crate) quoting: i64,
    pub(crate) strict: bool,
}

impl Dialect {
    fn named(name: &str) -> RunResult<Self> {
        let mut d = Self {
            delimiter: ',',
            quotechar: Some('"'),
            escapechar: None,
            doublequote: true,
            skipinitialspace: false,
            lineterminator: "\r\n".into(),
            quoting: QUOTE_MINIMAL,
            strict: false,
        };
        match name {
            "excel" => {}
            "excel-tab" => d.delimiter = '\t',
            "unix" => {
                d.quoting = QUOTE_ALL;
                d.lineterminator = "\n".into();
            }
            _ => return Err(csv_error("unknown dialect")),
        }
        Ok(d)
    }
}

/// The format parameters a reader takes as keywords.
struct FmtParams {
    dialect: Value,
    delimiter: Value,
    quotechar: Value,
    escapechar: Value,
    doublequote: Value,
    skipinitialspace: Value,
    lineterminator: Value,
    quoting: Value,
    strict: Value,
}

impl FmtParams {
    /// The dialect they describe (CPython's checks and messages).
    fn dialect(&self, vm: &mut VM<'_>) -> RunResult<Dialect> {
        let mut d = match &self.dialect {
            Value::None => Dialect::named("excel")?,
            v => match v.to_str(vm) {
                Ok(name) => Dialect::named(name)?,
                Err(_) => {
                    return Err(type_error(
                        "dialect must be a name ('excel', 'excel-tab', 'unix') in this sandbox",
                    ));
                }
            },
        };
        if !matches!(self.delimiter, Value::None) {
            d.delimiter = one_char(&self.delimiter, "delimiter", vm)?
                .ok_or_else(|| type_error("\"delimiter\" must be a 1-character string"))?;
        }
        if !matches!(self.quoting, Value::None) {
            let Value::Int(q) = self.quoting else {
                return Err(type_error("\"quoting\" must be an integer"));
            };
            if !(QUOTE_MINIMAL..=QUOTE_NONE).contains(&q) {
                return Err(type_error("bad \"quoting\" value"));
            }
            d.quoting = q;
        }
        if !matches!(self.quotechar, Value::None) {
            d.quotechar = one_char(&self.quotechar, "quotechar", vm)?;
        } else if matches!(self.quoting, Value::Int(_)) && d.quoting == QUOTE_NONE {
            d.quotechar = None;
        }
        if !matches!(self.escapechar, Value::None) {
            d.escapechar = one_char(&self.escapechar, "escapechar", vm)?;
        }
        if let Value::Bool(b) = self.doublequote {
            d.doublequote = b;
        }
        if let Value::Bool(b) = self.skipinitialspace {
            d.skipinitialspace = b;
        }
        if let Value::Bool(b) = self.strict {
            d.strict = b;
        }
        if !matches!(self.lineterminator, Value::None) {
            match self.lineterminator.to_str(vm) {
                Ok(t) => d.lineterminator = t.to_owned(),
                Err(_) => return Err(type_error("\"lineterminator\" must be a string")),
            }
        }
        if d.quotechar.is_none() && d.quoting != QUOTE_NONE {
            return Err(type_error("quotechar must be set if quoting enabled"));
        }
        Ok(d)
    }

    fn drop_with(self, vm: &mut VM<'_>) {
        for v in [
            self.dialect,
            self.delimiter,
            self.quotechar,
            self.escapechar,
            self.doublequote,
            self.skipinitialspace,
            self.lineterminator,
            self.quoting,
            self.strict,
        ] {
            v.drop_with(vm);
        }
    }
}

/// A one-character string parameter (`None` when given as `None`).
fn one_char(v: &Value, name: &str, vm: &mut VM<'_>) -> RunResult<Option<char>> {
    match v.to_str(vm) {
        Ok(s) => {
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(Some(c)),
                _ => Err(type_error(format!("\"{name}\" must be a 1-character string"))),
            }
        }
        Err(_) => Err(type_error(format!(
            "\"{name}\" must be string, not {}",
            v.py_type_name(vm)
        ))),
    }
}

/// The arguments of a csv function: its own (`head`), then `dialect` and the
/// keyword-only format parameters every csv function takes.
macro_rules! csv_args {
    ($name:ident, $py:tt, { $($head:tt)* }) => {
        #[derive(FromArgs)]
        #[from_args(name = $py, style = def)]
        struct $name {
            $($head)*
            #[from_args(default = Value::None)]
            dialect: Value,
            #[from_args(kw_only, default = Value::None)]
            delimiter: Value,
            #[from_args(kw_only, default = Value::None)]
            quotechar: Value,
            #[from_args(kw_only, default = Value::None)]
            escapechar: Value,
            #[from_args(kw_only, default = Value::None)]
            doublequote: Value,
            #[from_args(kw_only, default = Value::None)]
            skipinitialspace: Value,
            #[from_args(kw_only, default = Value::None)]
            lineterminator: Value,
            #[from_args(kw_only, default = Value::None)]
            quoting: Value,
            #[from_args(kw_only, default = Value::None)]
            strict: Value,
        }

        impl $name {
            /// Takes the format parameters out of the arguments.
            fn fmt_params(&mut self) -> FmtParams {
                let take = |v: &mut Value| std::mem::replace(v, Value::None);
                FmtParams {
                    dialect: take(&mut self.dialect),
                    delimiter: take(&mut self.delimiter),
                    quotechar: take(&mut self.quotechar),
                    escapechar: take(&mut self.escapechar),
                    doublequote: take(&mut self.doublequote),
                    skipinitialspace: take(&mut self.skipinitialspace),
                    lineterminator: take(&mut self.lineterminator),
                    quoting: take(&mut self.quoting),
                    strict: take(&mut self.strict),
                }
            }
        }
    };
}

/// The dialect `params` describe; they are released either way.
fn take_dialect(params: FmtParams, vm: &mut VM<'_>) -> RunResult<Dialect> {
    let dialect = params.dialect(vm);
    params.drop_with(vm);
    dialect
}

csv_args!(ReaderArgs, "reader", {
    #[from_args(pos_only)]
    csvfile: Value,
});

/// `csv.reader(csvfile, dialect='excel', **fmtparams)`.
fn reader(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let mut a = ReaderArgs::from_args(args, vm)?;
    let dialect = take_dialect(a.fmt_params(), vm);
    let csvfile = a.csvfile;
    defer_drop!(csvfile, vm);
    let (rows, line_nums) = parse_rows(csvfile, &dialect?, vm)?;
    let rows = rows
        .into_iter()
        .map(|r| Value::Ref(vm.heap.allocate(HeapData::List(List::new(r)))))
        .collect();
    Ok(reader_of(rows, line_nums, None, vm))
}

csv_args!(DictReaderArgs, "DictReader", {
    f: Value,
    #[from_args(default = Value::None)]
    fieldnames: Value,
    #[from_args(default = Value::None)]
    restkey: Value,
    #[from_args(default = Value::None)]
    restval: Value,
});

/// `csv.DictReader(f, fieldnames=None, restkey=None, restval=None, dialect='excel', **fmtparams)`:
/// one dict per non-empty row, keyed by the first row unless `fieldnames` is given.
fn dict_reader(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let mut a = DictReaderArgs::from_args(args, vm)?;
    let dialect = take_dialect(a.fmt_params(), vm);
    let (f, fieldnames, restkey, restval) = (a.f, a.fieldnames, a.restkey, a.restval);
    defer_drop!(f, vm);
    defer_drop!(fieldnames, vm);
    defer_drop!(restkey, vm);
    defer_drop!(restval, vm);
    let (rows, line_nums) = parse_rows(f, &dialect?, vm)?;
    let mut nums = line_nums.into_iter();
    let mut rows = rows.into_iter();
    let names: Vec<Value> = if matches!(fieldnames, Value::None) {
        nums.next();
        match rows.next() {
            Some(first) => first,
            None => Vec::new(),
        }
    } else {
        match crate::types::iter::collect_iterable(fieldnames, vm) {
            Ok(n) => n,
            Err(e) => {
                drop_rows(rows, vm);
                return Err(e);
            }
        }
    };
    let mut dicts = Vec::new();
    let mut dict_nums = Vec::new();
    let mut failure = None;
    for (row, num) in rows.by_ref().zip(nums) {
        if row.is_empty() {
            continue;
        }
        dict_nums.push(num);
        match row_dict(row, &names, restkey, restval, vm) {
            Ok(d) => dicts.push(d),
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    drop_rows(rows, vm);
    if let Some(e) = failure {
        for v in dicts.into_iter().chain(names) {
            v.drop_with(vm);
        }
        return Err(e);
    }
    let names = Value::Ref(vm.heap.allocate(HeapData::List(List::new(names))));
    Ok(reader_of(dicts, dict_nums, Some(names), vm))
}

/// One `DictReader` row: `dict(zip(names, row))`, the surplus under
/// `restkey`, missing names set to `restval`.
fn row_dict(row: Vec<Value>, names: &[Value], restkey: &Value, restval: &Value, vm: &mut VM<'_>) -> RunResult<Value> {
    let mut pairs = Vec::with_capacity(names.len().max(row.len()));
    let mut row = row.into_iter();
    for name in names {
        let key = name.clone_with_heap(vm.heap);
        match row.next() {
            Some(v) => pairs.push((key, v)),
            None => pairs.push((key, restval.clone_with_heap(vm.heap))),
        }
    }
    let rest: Vec<Value> = row.collect();
    if !rest.is_empty() {
        let list = Value::Ref(vm.heap.allocate(HeapData::List(List::new(rest))));
        pairs.push((restkey.clone_with_heap(vm.heap), list));
    }
    let dict = Dict::from_pairs(pairs, vm)?;
    Ok(Value::Ref(vm.heap.allocate(HeapData::Dict(dict))))
}

fn drop_rows(rows: impl Iterator<Item = Vec<Value>>, vm: &mut VM<'_>) {
    for row in rows {
        for v in row {
            v.drop_with(vm);
        }
    }
}

csv_args!(WriterArgs, "writer", {
    #[from_args(pos_only)]
    csvfile: Value,
});

/// `csv.writer(csvfile, dialect='excel', **fmtparams)`.
fn writer(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let mut a = WriterArgs::from_args(args, vm)?;
    let dialect = take_dialect(a.fmt_params(), vm);
    let csvfile = a.csvfile;
    defer_drop!(csvfile, vm);
    let dialect = dialect?;
    let target = writer_target(csvfile, vm)?;
    let w = CsvWriter::new(target, dialect, None);
    Ok(Value::Ref(vm.heap.allocate(HeapData::CsvWriter(Box::new(w)))))
}

csv_args!(DictWriterArgs, "DictWriter", {
    f: Value,
    fieldnames: Value,
    #[from_args(default = Value::None)]
    restval: Value,
    #[from_args(default = Value::None)]
    extrasaction: Value,
});

/// `csv.DictWriter(f, fieldnames, restval='', extrasaction='raise', dialect='excel', **fmtparams)`.
fn dict_writer(vm: &mut VM<'_>, args: ArgValues) -> RunResult<Value> {
    let mut a = DictWriterArgs::from_args(args, vm)?;
    let dialect = take_dialect(a.fmt_params(), vm);
    let (f, fieldnames, restval, extrasaction) = (a.f, a.fieldnames, a.restval, a.extrasaction);
    defer_drop!(f, vm);
    defer_drop!(fieldnames, vm);
    defer_drop!(extrasaction, vm);
    let extras_raise = match extrasaction {
        Value::None => true,
        v => match v.to_str(vm).map(str::to_lowercase).as_deref() {
            Ok("raise") => true,
            Ok("ignore") => false,
            _ => {
                let r = v.py_str(vm)?;
                defer_drop!(r, vm);
                let shown = r.to_str(vm)?.to_owned();
                restval.drop_with(vm);
                return Err(csv_error(format!(
                    "extrasaction ({shown}) must be 'raise' or 'ignore'"
                )));
            }
        },
    };
    let restval = match restval {
        Value::None => allocate_string("", vm.heap),
        v => v,
    };
    let dialect = match dialect {
        Ok(d) => d,
        Err(e) => {
            restval.drop_with(vm);
            return Err(e);
        }
    };
    let names = match crate::types::iter::collect_iterable(fieldnames, vm) {
        Ok(n) => n,
        Err(e) => {
            restval.drop_with(vm);
            return Err(e);
        }
    };
    let target = match writer_target(f, vm) {
        Ok(t) => t,
        Err(e) => {
            restval.drop_with(vm);
            for n in names {
                n.drop_with(vm);
            }
            return Err(e);
        }
    };
    let fields = DictFields {
        fieldnames: names,
        restval,
        extras_raise,
    };
    let w = CsvWriter::new(target, dialect, Some(fields));
    Ok(Value::Ref(vm.heap.allocate(HeapData::CsvWriter(Box::new(w)))))
}

/// Where a writer writes: an `io.StringIO` (a new reference to it) or
/// `sys.stdout` (`None`).
fn writer_target(f: &Value, vm: &mut VM<'_>) -> RunResult<Option<HeapId>> {
    match f {
        Value::Marker(m) if m.0 == StaticStrings::Stdout => Ok(None),
        Value::Ref(id) if matches!(vm.heap.get(*id), HeapData::StringIo(_)) => {
            vm.heap.inc_ref(*id);
            Ok(Some(*id))
        }
        other => Err(type_error(format!(
            "argument 1 must have a \"write\" method, not '{}' (sandbox: write to an io.StringIO() or sys.stdout)",
            other.py_type_name(vm)
        ))),
    }
}

/// A reader over `rows` (lists, or dicts with `fieldnames`), each complete
/// after `line_nums[i]` source lines.
fn reader_of(rows: Vec<Value>, line_nums: Vec<u64>, fieldnames: Option<Value>, vm: &mut VM<'_>) -> Value {
    let list = vm.heap.allocate(HeapData::List(List::new(rows)));
    let reader = CsvReader::new(list, line_nums, fieldnames);
    Value::Ref(vm.heap.allocate(HeapData::CsvReader(Box::new(reader))))
}

/// Reads every line of `input` and parses them into rows of field values,
/// with the number of lines read when each row was complete.
fn parse_rows(input: &Value, dialect: &Dialect, vm: &mut VM<'_>) -> RunResult<(Vec<Vec<Value>>, Vec<u64>)> {
    let iterator = input.py_iter(vm).map_err(|_| {
        type_error(format!(
            "argument 1 must be an iterator of strings (a file, io.StringIO or a list of lines), not '{}'",
            input.py_type_name(vm)
        ))
    })?;
    defer_drop!(iterator, vm);
    let mut iterator = iterator.read(vm);
    let mut parser = Parser::new(dialect.clone(), vm.heap.module_state.csv_field_limit);
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut line_nums: Vec<u64> = Vec::new();
    let result = (|| -> RunResult<()> {
        let mut lines = 0u64;
        while let Some(line) = iterator.py_next(vm)? {
            lines += 1;
            if lines.is_multiple_of(1024) {
                vm.heap.tracker.check_time()?;
            }
            let fed = match line.to_str(vm) {
                Ok(text) => parser.feed_line(text),
                Err(_) => Err(format!(
                    "iterator should return strings, not {} (the file should be opened in text mode)",
                    line.py_type_name(vm)
                )),
            };
            line.drop_with(vm);
            fed.map_err(csv_error)?;
            for record in parser.records.drain(..) {
                rows.push(record_values(record, vm)?);
                line_nums.push(lines);
            }
        }
        if let Some(record) = parser.finish().map_err(csv_error)? {
            rows.push(record_values(record, vm)?);
            line_nums.push(lines);
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok((rows, line_nums)),
        Err(e) => {
            drop_rows(rows.into_iter(), vm);
            Err(e)
        }
    }
}

fn record_values(record: Vec<Field>, vm: &mut VM<'_>) -> RunResult<Vec<Value>> {
    let mut out = Vec::with_capacity(record.len());
    for f in record {
        match f {
            Field::Text(s) => out.push(allocate_string(s, vm.heap)),
            Field::Number(s) => match s.trim().parse::<f64>() {
                Ok(x) => out.push(Value::Float(x)),
                Err(_) => {
                    for v in out {
                        v.drop_with(vm);
                    }
                    return Err(SimpleException::new_msg(
                        ExcType::ValueError,
                        format!("could not convert string to float: '{s}'"),
                    )
                    .into());
                }
            },
        }
    }
    Ok(out)
}

/// A parsed field: text, or (`QUOTE_NONNUMERIC`, unquoted) a number to convert.
#[derive(Debug, PartialEq)]
enum Field {
    Text(String),
    Number(String),
}

/// The parser states of CPython's `_csv.c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    StartRecord,
    StartField,
    EscapedChar,
    InField,
    InQuotedField,
    EscapeInQuotedField,
    QuoteInQuotedField,
    EatCrnl,
    AfterEscapedCrnl,
}

/// CPython's csv parser: characters in, records out.
struct Parser {
    d: Dialect,
    limit: i64,
    state: State,
    field: String,
    field_len: i64,
    numeric: bool,
    fields: Vec<Field>,
    records: Vec<Vec<Field>>,
}

/// `c` in `parse_process_char`: a character or the end of a line.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Input {
    Char(char),
    Eol,
}

impl Parser {
    fn new(d: Dialect, limit: i64) -> Self {
        Self {
            d,
            limit,
            state: State::StartRecord,
            field: String::new(),
            field_len: 0,
            numeric: false,
            fields: Vec::new(),
            records: Vec::new(),
        }
    }

    /// One line (one item of the input iterable), then its end.
    fn feed_line(&mut self, line: &str) -> Result<(), String> {
        for c in line.chars() {
            self.process(Input::Char(c))?;
        }
        self.process(Input::Eol)?;
        if self.state == State::StartRecord {
            let record = std::mem::take(&mut self.fields);
            self.records.push(record);
        }
        Ok(())
    }

    /// The end of the input: a record left open (a quoted field not closed).
    fn finish(&mut self) -> Result<Option<Vec<Field>>, String> {
        if self.field_len != 0 || self.state == State::InQuotedField {
            if self.d.strict {
                return Err("unexpected end of data".into());
            }
            self.save_field();
            return Ok(Some(std::mem::take(&mut self.fields)));
        }
        Ok(None)
    }

    fn add_char(&mut self, c: char) -> Result<(), String> {
        if self.field_len >= self.limit {
            return Err(format!("field larger than field limit ({})", self.limit));
        }
        self.field.push(c);
        self.field_len += 1;
        Ok(())
    }

    fn save_field(&mut self) {
        let text = std::mem::take(&mut self.field);
        self.fields.push(if self.numeric {
            Field::Number(text)
        } else {
            Field::Text(text)
        });
        self.numeric = false;
        self.field_len = 0;
    }

    fn is(&self, c: Input, wanted: Option<char>) -> bool {
        matches!((c, wanted), (Input::Char(x), Some(w)) if x == w)
    }

    fn process(&mut self, c: Input) -> Result<(), String> {
        let newline = matches!(c, Input::Char('\n' | '\r'));
        let quoting_on = self.d.quoting != QUOTE_NONE;
        let (quote, escape, delimiter) = (self.d.quotechar, self.d.escapechar, Some(self.d.delimiter));
        match self.state {
            State::StartRecord => {
                if c == Input::Eol {
                    return Ok(());
                } else if newline {
                    self.state = State::EatCrnl;
                    return Ok(());
                }
                self.state = State::StartField;
                self.start_field(c)
            }
            State::StartField => self.start_field(c),
            State::EscapedChar => {
                if newline {
                    self.add_char(char_of(c))?;
                    self.state = State::AfterEscapedCrnl;
                    return Ok(());
                }
                self.add_char(if c == Input::Eol { '\n' } else { char_of(c) })?;
                self.state = State::InField;
                Ok(())
            }
            State::AfterEscapedCrnl if c == Input::Eol => Ok(()),
            State::AfterEscapedCrnl | State::InField => {
                if newline || c == Input::Eol {
                    self.save_field();
                    self.state = if c == Input::Eol {
                        State::StartRecord
                    } else {
                        State::EatCrnl
                    };
                } else if self.is(c, escape) {
                    self.state = State::EscapedChar;
                } else if self.is(c, delimiter) {
                    self.save_field();
                    self.state = State::StartField;
                } else {
                    self.add_char(char_of(c))?;
                    self.state = State::InField;
                }
                Ok(())
            }
            State::InQuotedField => {
                if c == Input::Eol {
                } else if self.is(c, escape) {
                    self.state = State::EscapeInQuotedField;
                } else if self.is(c, quote) && quoting_on {
                    self.state = if self.d.doublequote {
                        State::QuoteInQuotedField
                    } else {
                        State::InField
                    };
                } else {
                    self.add_char(char_of(c))?;
                }
                Ok(())
            }
            State::EscapeInQuotedField => {
                self.add_char(if c == Input::Eol { '\n' } else { char_of(c) })?;
                self.state = State::InQuotedField;
                Ok(())
            }
            State::QuoteInQuotedField => {
                if quoting_on && self.is(c, quote) {
                    self.add_char(char_of(c))?;
                    self.state = State::InQuotedField;
                } else if self.is(c, delimiter) {
                    self.save_field();
                    self.state = State::StartField;
                } else if newline || c == Input::Eol {
                    self.save_field();
                    self.state = if c == Input::Eol {
                        State::StartRecord
                    } else {
                        State::EatCrnl
                    };
                } else if !self.d.strict {
                    self.add_char(char_of(c))?;
                    self.state = State::InField;
                } else {
                    return Err(format!(
                        "'{}' expected after '{}'",
                        self.d.delimiter,
                        quote.unwrap_or('"')
                    ));
                }
                Ok(())
            }
            State::EatCrnl => {
                if newline {
                } else if c == Input::Eol {
                    self.state = State::StartRecord;
                } else {
                    return Err(
                        "new-line character seen in unquoted field - do you need to open the file with newline=''?"
                            .into(),
                    );
                }
                Ok(())
            }
        }
    }

    fn start_field(&mut self, c: Input) -> Result<(), String> {
        let newline = matches!(c, Input::Char('\n' | '\r'));
        if newline || c == Input::Eol {
            self.save_field();
            self.state = if c == Input::Eol {
                State::StartRecord
            } else {
                State::EatCrnl
            };
        } else if self.is(c, self.d.quotechar) && self.d.quoting != QUOTE_NONE {
            self.state = State::InQuotedField;
        } else if self.is(c, self.d.escapechar) {
            self.state = State::EscapedChar;
        } else if c == Input::Char(' ') && self.d.skipinitialspace {
        } else if self.is(c, Some(self.d.delimiter)) {
            self.save_field();
        } else {
            if self.d.quoting == QUOTE_NONNUMERIC {
                self.numeric = true;
            }
            self.add_char(char_of(c))?;
            self.state = State::InField;
        }
        Ok(())
    }
}

fn char_of(c: Input) -> char {
    match c {
        Input::Char(c) => c,
        Input::Eol => '\n',
    }
}

