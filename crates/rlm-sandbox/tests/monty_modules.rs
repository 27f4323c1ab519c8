//! The `csv`, `io` and `random` modules added to monty by the rlm patch
//! (vendor/PATCHES.md): each program's expected output is what CPython 3.11
//! prints for it (`python3 -c ...`); `import` of these modules failed on
//! unpatched monty 0.0.23.

use crate::common;

/// Runs `code` and returns what it printed; a Python error fails the test.
async fn printed(code: &str) -> String {
    let (mut s, h) = common::interpreter_with("").await;
    let r = s.run_cell(code, &h).await.expect("the interpreter runs");
    assert!(r.error.is_none(), "{code}: {:?}", r.error);
    r.stdout
}

/// Runs `code` and returns its exception as `Type: message`.
async fn raised(code: &str) -> String {
    let (mut s, h) = common::interpreter_with("").await;
    let r = s.run_cell(code, &h).await.expect("the interpreter runs");
    let e = r
        .error
        .unwrap_or_else(|| panic!("{code}: no error, printed {:?}", r.stdout));
    format!("{}: {}", e.exc_type, e.message)
}

#[tokio::test]
async fn csv_readers_parse_like_cpython() {
    let code = r#"import csv, io, sys
text = 'id,name,notes\n1,Ada,"likes ""math"", logic"\n2,Bob,"two\nlines"\n\n3,Cy,\n'
rows = list(csv.reader(io.StringIO(text)))
print(rows)
print(list(csv.reader(text.splitlines())))
r = csv.reader(['a;b', ' c; "d;e"'], delimiter=';', skipinitialspace=True)
print(next(r), next(r))
for d in csv.DictReader(io.StringIO(text)):
    print(d)
print(list(csv.DictReader(['1,2,3', '4'], fieldnames=['x', 'y'], restkey='more', restval='-')))
print(list(csv.reader(['1,"a",2.5'], quoting=csv.QUOTE_NONNUMERIC)))
print(list(csv.reader(['a\tb'], dialect='excel-tab')))
print(csv.field_size_limit(sys.maxsize), csv.QUOTE_ALL, csv.QUOTE_NONE)
"#;
    let expected = "[['id', 'name', 'notes'], ['1', 'Ada', 'likes \"math\", logic'], ['2', 'Bob', 'two\\nlines'], [], ['3', 'Cy', '']]\n[['id', 'name', 'notes'], ['1', 'Ada', 'likes \"math\", logic'], ['2', 'Bob', 'twolines'], [], ['3', 'Cy', '']]\n['a', 'b'] ['c', 'd;e']\n{'id': '1', 'name': 'Ada', 'notes': 'likes \"math\", logic'}\n{'id': '2', 'name': 'Bob', 'notes': 'two\\nlines'}\n{'id': '3', 'name': 'Cy', 'notes': ''}\n[{'x': '1', 'y': '2', 'more': ['3']}, {'x': '4', 'y': '-'}]\n[[1.0, 'a', 2.5]]\n[['a', 'b']]\n131072 1 3\n";
    assert_eq!(printed(code).await, expected);
}

#[tokio::test]
async fn csv_readers_keep_line_num_and_fieldnames() {
    let code = r#"import csv, io
text = 'name,notes\nAda,"two\nlines"\n\nBob,x\n'
r = csv.reader(io.StringIO(text))
print(r.line_num, next(r), r.line_num, next(r), r.line_num)
print([row for row in r], r.line_num)
d = csv.DictReader(io.StringIO(text))
print(d.fieldnames)
rows = list(d)
print(rows, d.line_num, d.fieldnames)
print(type(r), type(d), list(csv.DictReader(['a,b'], fieldnames=['x', 'y'])))
"#;
    let expected = "0 ['name', 'notes'] 1 ['Ada', 'two\\nlines'] 3\n[[], ['Bob', 'x']] 5\n['name', 'notes']\n[{'name': 'Ada', 'notes': 'two\\nlines'}, {'name': 'Bob', 'notes': 'x'}] 5 ['name', 'notes']\n<class '_csv.reader'> <class 'csv.DictReader'> [{'x': 'a', 'y': 'b'}]\n";
    assert_eq!(printed(code).await, expected);
}

#[tokio::test]
async fn csv_writers_format_like_cpython() {
    let code = r#"import csv, io, sys
buf = io.StringIO()
w = csv.writer(buf)
print(w.writerow(['id', 'name', 'note']))
w.writerows([[1, 'Ada', 'likes "math", logic'], [2, 'Bob', 'two\nlines'], [3.5, None, '']])
w.writerow([''])
print(repr(buf.getvalue()))
print(list(csv.reader(io.StringIO(buf.getvalue()))))
out = io.StringIO()
dw = csv.DictWriter(out, fieldnames=['name', 'score'], restval='?')
dw.writeheader()
dw.writerow({'name': 'x,y', 'score': 3})
dw.writerows([{'name': 'z'}, {'score': True, 'name': 'q'}])
print(repr(out.getvalue()))
t = io.StringIO()
csv.writer(t, delimiter='\t', quoting=csv.QUOTE_NONNUMERIC, lineterminator='\n').writerow(['a', 1, 2.5, 'b\tc'])
print(repr(t.getvalue()))
u = io.StringIO()
csv.writer(u, dialect='unix').writerow(['a', 1])
print(repr(u.getvalue()))
csv.writer(sys.stdout, lineterminator='\n').writerow(['to', 'stdout'])
"#;
    let expected = "14\n'id,name,note\\r\\n1,Ada,\"likes \"\"math\"\", logic\"\\r\\n2,Bob,\"two\\nlines\"\\r\\n3.5,,\\r\\n\"\"\\r\\n'\n[['id', 'name', 'note'], ['1', 'Ada', 'likes \"math\", logic'], ['2', 'Bob', 'two\\nlines'], ['3.5', '', ''], ['']]\n'name,score\\r\\n\"x,y\",3\\r\\nz,?\\r\\nq,True\\r\\n'\n'\"a\"\\t1\\t2.5\\t\"b\\tc\"\\n'\n'\"a\",\"1\"\\n'\nto,stdout\n";
    assert_eq!(printed(code).await, expected);
}

#[tokio::test]
async fn string_io_reads_writes_and_seeks_like_cpython() {
    let code = r#"import io
f = io.StringIO('héllo\nworld\nlast')
print(repr(f.readline()), repr(f.read(3)), f.tell())
print(f.readlines())
print(repr(f.read()))
f.seek(0)
print([line for line in f])
g = io.StringIO()
print(g.write('abc'), g.write('déf\n'))
g.seek(1)
g.write('XY')
print(repr(g.getvalue()), g.tell())
print(g.truncate(3), repr(g.getvalue()))
with io.StringIO('x') as h:
    print(h.read(), h.closed)
print(h.closed)
"#;
    let expected = "'héllo\\n' 'wor' 9\n['ld\\n', 'last']\n''\n['héllo\\n', 'world\\n', 'last']\n3 4\n'aXYdéf\\n' 3\n3 'aXY'\nx False\nTrue\n";
    assert_eq!(printed(code).await, expected);
}

#[tokio::test]
async fn seeded_random_gives_cpythons_numbers() {
    let code = r#"import random
random.seed(42)
print(random.random())
print(random.randint(1, 100), random.randrange(10), random.randrange(5, 50, 5), random.randrange(10, 0, -3))
print(random.choice('abcdefghij'), random.choice([10, 20, 30]))
xs = list(range(10))
random.shuffle(xs)
print(xs)
print(random.sample(range(100), 5), random.sample(['a', 'b', 'c', 'd'], 2))
print(random.sample(range(1000), 30)[:5])
print(random.choices(['x', 'y', 'z'], k=5), random.choices(['x', 'y', 'z'], weights=[1, 0, 3], k=5))
print(random.choices(range(4), cum_weights=[1, 2, 3, 10], k=4))
print(round(random.uniform(1, 2), 12), round(random.gauss(0, 1), 12), round(random.gauss(5, 2), 12))
print(random.getrandbits(8), random.getrandbits(40), random.getrandbits(64))
random.seed(2**40 + 7)
print(random.random())
random.seed(-5)
a = random.random()
random.seed(5)
print(a == random.random())
"#;
    let expected = "0.6394267984578837\n4 4 20 7\nc 30\n[7, 2, 5, 6, 0, 3, 4, 9, 8, 1]\n[29, 64, 77, 3, 71] ['b', 'c']\n[665, 718, 558, 429, 225]\n['x', 'x', 'y', 'x', 'z'] ['x', 'z', 'z', 'z', 'z']\n[1, 0, 3, 3]\n1.985221520661 1.233116855472 1.833623051375\n97 499410093881 15386621650891716399\n0.6137037779936511\nTrue\n";
    assert_eq!(printed(code).await, expected);
}

#[tokio::test]
async fn bad_input_raises_a_clear_error() {
    // CPython's messages; `csv.Error` is `ValueError` here.
    let cases = [
        (
            "import csv\nlist(csv.reader([1, 2]))",
            "ValueError: iterator should return strings, not int (the file should be opened in text mode)",
        ),
        (
            "import csv\ncsv.field_size_limit(5)\nlist(csv.reader(['abcdefgh']))",
            "ValueError: field larger than field limit (5)",
        ),
        (
            "import csv\ncsv.reader(['a'], delimiter='ab')",
            "TypeError: \"delimiter\" must be a 1-character string",
        ),
        (
            "import csv\nlist(csv.reader(['\"a\"b'], strict=True))",
            "ValueError: ',' expected after '\"'",
        ),
        (
            "import csv\ntry:\n    csv.field_size_limit(3)\n    list(csv.reader(['abcd']))\nexcept csv.Error as e:\n    raise RuntimeError('caught')",
            "RuntimeError: caught",
        ),
        (
            "import csv, io\ncsv.DictWriter(io.StringIO(), ['a']).writerow({'a': 1, 'b': 2})",
            "ValueError: dict contains fields not in fieldnames: 'b'",
        ),
        (
            "import csv, io\ncsv.writer(io.StringIO(), quoting=csv.QUOTE_NONE).writerow(['a,b'])",
            "ValueError: need to escape, but no escapechar set",
        ),
        (
            "import csv, io\ncsv.DictWriter(io.StringIO(), ['a'], extrasaction='skip')",
            "ValueError: extrasaction (skip) must be 'raise' or 'ignore'",
        ),
        (
            "import csv\ncsv.writer(5)",
            "TypeError: argument 1 must have a \"write\" method, not 'int' (sandbox: write to an io.StringIO() or sys.stdout)",
        ),
        (
            "import csv, io\ncsv.writer(io.StringIO()).writerow(5)",
            "ValueError: iterable expected, not int",
        ),
        (
            "import csv, io\nf = io.StringIO()\nw = csv.writer(f)\nf.close()\nw.writerow(['a'])",
            "ValueError: I/O operation on closed file",
        ),
        (
            "import random\nrandom.choice([])",
            "IndexError: Cannot choose from an empty sequence",
        ),
        (
            "import random\nrandom.sample([1, 2], 3)",
            "ValueError: Sample larger than population or is negative",
        ),
        (
            "import random\nrandom.randrange(5, 5)",
            "ValueError: empty range for randrange() (5, 5, 0)",
        ),
        (
            "import random\nrandom.choices([1, 2], weights=[1])",
            "ValueError: The number of weights does not match the population",
        ),
        (
            "import random\nrandom.shuffle((1, 2))",
            "TypeError: random.shuffle() needs a list here, not 'tuple' (sandbox: shuffle a list, e.g. xs = list(xs))",
        ),
        (
            "import io\nf = io.StringIO('a')\nf.close()\nf.read()",
            "ValueError: I/O operation on closed file",
        ),
        (
            "import io\nio.StringIO().write(5)",
            "TypeError: string argument expected, got 'int'",
        ),
    ];
    for (code, expected) in cases {
        assert_eq!(raised(code).await, expected, "{code}");
    }
}

#[tokio::test]
async fn the_generator_state_lives_with_the_interpreter() {
    // Seeded in one cell, drawn in the next: the same numbers as one program;
    // a fresh interpreter starts from its own (OS) seed.
    let (mut s, h) = common::interpreter_with("").await;
    let r = s
        .run_cell("import random\nrandom.seed(7)", &h)
        .await
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    let r = s
        .run_cell("print([random.randint(0, 9) for _ in range(6)])", &h)
        .await
        .unwrap();
    // python3 -c "import random; random.seed(7); print([random.randint(0, 9) for _ in range(6)])"
    assert_eq!(r.stdout, "[5, 2, 6, 0, 1, 8]\n");
    let a = printed("import random\nprint(random.random())").await;
    let b = printed("import random\nprint(random.random())").await;
    assert_ne!(a, b, "two unseeded interpreters drew the same number");
}

#[tokio::test]
async fn huge_draws_are_refused_and_the_interpreter_lives() {
    // Ten billion picks would need 240 GB: refused up front, the variables stay.
    let (mut s, h) = common::interpreter_with("").await;
    let r = s.run_cell("import random\nkept = 7", &h).await.unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    for code in [
        "random.choices([1, 2], k=10**10)",
        "random.sample(range(10**12), 10**10)",
    ] {
        let r = s.run_cell(code, &h).await.expect("the worker lives");
        let e = r.error.unwrap_or_else(|| panic!("{code}: no error"));
        assert_eq!(e.exc_type, "MemoryError", "{code}: {e:?}");
    }
    let r = s.run_cell("kept", &h).await.unwrap();
    assert_eq!(r.value.as_deref(), Some("7"));
}
