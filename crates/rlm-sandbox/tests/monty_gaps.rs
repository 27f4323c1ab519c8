//! The monty gaps fixed by the patched copies in `vendor/` (see
//! vendor/PATCHES.md): each test fails on unpatched monty 0.0.23.

use crate::common;

use common::interpreter_with;

/// Runs `code` with `context` and returns what it printed; a Python error fails the test.
async fn printed(context: &str, code: &str) -> String {
    // Scans of megabytes in a debug build on a busy machine: room beyond the
    // default 5 s of the test config.
    let mut config = common::config();
    config.cell_time_limit = std::time::Duration::from_secs(60);
    let (mut s, h) = common::start_with(&config, context).await;
    let r = s.run_cell(code, &h).await.expect("the interpreter runs");
    assert!(r.error.is_none(), "{code}: {:?}", r.error);
    r.stdout
}

/// About 1.2 MB of prose without the word HUM (and a variant with it).
fn big_text(with_hum: bool) -> String {
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!(
            "Line {i}: the humming engine hummed; HUMAN error. "
        ));
        if with_hum && i % 5_000 == 0 {
            text.push_str("HUM ");
        }
    }
    text
}

#[tokio::test]
async fn word_boundary_scan_of_a_large_text_without_a_match() {
    // It raised "Max limit for backtracking count exceeded": fancy-regex ran
    // `\b` patterns on its backtracking VM, one backtrack per position.
    let text = big_text(false);
    assert!(text.len() > 1_000_000);
    let out = printed(
        &text,
        "import re\nprint(re.compile(r'\\bHUM\\b').findall(context))\n\
         print(len(re.findall(r'\\bhum\\w*', context)))\n\
         print(re.search(r'\\bHUM\\b', context))",
    )
    .await;
    assert_eq!(out, "[]\n40000\nNone\n");
    let out = printed(
        &big_text(true),
        "import re\nprint(len(re.findall(r'\\bHUM\\b', context)))\nprint(len(re.findall(r'HUM\\B', context)))",
    )
    .await;
    assert_eq!(out, "4\n20000\n");
}

#[tokio::test]
async fn backtracking_patterns_scan_large_texts() {
    // Lookbehind and backreferences need the backtracking VM: about one
    // backtrack per position, so a 2 MB scan passed the old limit of 1,000,000.
    let mut text = "filler text without the label ".repeat(70_000);
    text.push_str("Name: Ada");
    let out = printed(
        &text,
        "import re\nprint(re.findall(r'(?<=Name: )\\w+', context))\nprint(re.findall(r'(\\w)\\1{5}', context))",
    )
    .await;
    assert_eq!(out, "['Ada']\n[]\n");
}

#[tokio::test]
async fn generator_expressions_are_iterators() {
    let out = printed(
        "",
        "items = [{'n': 1}, {'n': 5}, {'n': 9}]\n\
         print(next(c for c in items if c['n'] > 2))\n\
         print(next((c for c in items if c['n'] > 100), None))\n\
         g = (x * x for x in range(4))\n\
         print(list(g), list(g))\n\
         print(sum(x for x in range(10)), ''.join(str(x) for x in range(3)))\n\
         print(max((len(w), w) for w in 'a bbb cc'.split()), sorted(x % 3 for x in range(5)))\n\
         print(dict((k, k * 2) for k in 'ab'), any(x > 3 for x in [1, 5]))\n\
         try:\n    len(x for x in [1])\nexcept TypeError as e:\n    print('TypeError')",
    )
    .await;
    assert_eq!(
        out,
        "{'n': 5}\nNone\n[0, 1, 4, 9] []\n45 012\n(3, 'bbb') [0, 0, 1, 1, 2]\n{'a': 'aa', 'b': 'bb'} True\nTypeError\n"
    );
}

#[tokio::test]
async fn async_gather_over_a_generator_expression() {
    let (mut s, h) = interpreter_with("").await;
    let r = s
        .run_cell(
            "import asyncio\nr = await asyncio.gather(*(aecho(i) for i in range(3)))\nprint(r)",
            &h,
        )
        .await
        .unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(r.stdout, "['answer 0', 'answer 1', 'answer 2']\n");
}

#[tokio::test]
async fn slicing_long_strings_matches_python() {
    // The character index (long strings) must agree with a plain walk over
    // the characters for ASCII and non-ASCII text, any bounds and steps.
    let unit = "é日本abc\u{1F600}xyz ";
    let text = unit.repeat(2_000);
    let out = printed(
        &text,
        "chars = list(context)\n\
         n = len(chars)\n\
         bad = []\n\
         if len(context) != n:\n    bad.append(('len', len(context), n))\n\
         for a in [0, 1, 7, 255, 256, 257, 4095, 4096, n - 1, n, n + 5, -1, -300, -n, -n - 3]:\n\
         \x20   for b in [0, 3, 256, 1000, 9999, n, n + 1, -1, -2, -257]:\n\
         \x20       if context[a:b] != ''.join(chars[a:b]):\n\
         \x20           bad.append((a, b))\n\
         \x20   if -n <= a < n and context[a] != chars[a]:\n\
         \x20       bad.append(('index', a))\n\
         for sl in [slice(None, None, 2), slice(5, 900, 7), slice(None, None, -1), slice(-1, 10, -3), slice(None, 500)]:\n\
         \x20   if context[sl] != ''.join(chars[sl]):\n\
         \x20       bad.append(('slice', sl.start, sl.stop, sl.step))\n\
         try:\n    context[n]\nexcept IndexError:\n    pass\nelse:\n    bad.append('no IndexError')\n\
         ascii_text = 'abcdefghij' * 1000\n\
         if ascii_text[4095:4105] != 'fghijabcde' or ascii_text[-3:] != 'hij' or len(ascii_text) != 10000:\n\
         \x20   bad.append('ascii')\n\
         print(n, bad)",
    )
    .await;
    assert_eq!(out, format!("{} []\n", text.chars().count()));
}
