//! Property tests over the command line of `rlm ask`: any arguments — every
//! flag the parser knows (read from clap, so new flags are fuzzed too), with
//! hostile values (NaN, infinities, negatives, huge numbers, empty, control
//! characters, non-UTF-8) — are parsed and checked the way `rlm ask` checks
//! them before touching a store or a model. The outcome is a value or a
//! one-line error, never a panic.
//!
//! Cases: `PROPTEST_CASES` (default 512 here, a few seconds); a long run is
//! `PROPTEST_CASES=200000 cargo test -p rlm cli_fuzz`.

use std::ffi::OsString;

use clap::{CommandFactory, Parser};
use proptest::prelude::*;

use crate::{Cli, Command};

/// The long flags of `rlm ask` and whether each takes a value.
fn ask_flags() -> Vec<(String, bool)> {
    let cli = Cli::command();
    let ask = cli
        .get_subcommands()
        .find(|c| c.get_name() == "ask")
        .expect("rlm has an ask command");
    ask.get_arguments()
        .filter_map(|a| {
            let long = a.get_long()?;
            Some((format!("--{long}"), a.get_action().takes_values()))
        })
        .collect()
}

/// Values that have broken parsers before: numbers at and past every edge,
/// words that look like numbers, text with control characters.
fn hostile_value() -> impl Strategy<Value = OsString> {
    prop_oneof![
        Just("NaN".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-inf".to_string()),
        Just("Infinity".to_string()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just("-0".to_string()),
        Just("1e400".to_string()),
        Just("-1e400".to_string()),
        Just("18446744073709551616".to_string()),
        Just("99999999999999999999999999".to_string()),
        Just("0x10".to_string()),
        Just("".to_string()),
        Just(" ".to_string()),
        Just("1.5".to_string()),
        Just("auto".to_string()),
        Just("on".to_string()),
        Just("/dev/null".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| n.to_string()),
        "\\PC{0,40}",
        "[\\x00-\\x1f]{1,8}",
    ]
    .prop_map(OsString::from)
    .boxed()
    .prop_union(non_utf8().boxed())
    .or(Just(OsString::from("--")).boxed())
}

/// An argument that is not valid UTF-8.
fn non_utf8() -> impl Strategy<Value = OsString> {
    use std::os::unix::ffi::OsStringExt;
    prop::collection::vec(any::<u8>(), 1..12).prop_map(|mut bytes| {
        bytes.push(0xff);
        OsString::from_vec(bytes)
    })
}

/// `rlm ask QUESTION` plus up to 8 flags (a known one with a hostile value,
/// or an unknown one) in any order.
fn ask_argv() -> impl Strategy<Value = Vec<OsString>> {
    let flags = ask_flags();
    // `--flag value` or `--flag=value` (the only way a value starting with
    // `-` reaches our checks rather than clap's).
    let flag =
        (0..flags.len() + 1, hostile_value(), any::<bool>()).prop_map(move |(i, value, joined)| {
            match flags.get(i) {
                Some((name, true)) if joined => {
                    let mut arg = OsString::from(format!("{name}="));
                    arg.push(value);
                    vec![arg]
                }
                Some((name, true)) => vec![OsString::from(name), value],
                Some((name, false)) => vec![OsString::from(name)],
                None => vec![OsString::from("--no-such-flag"), value],
            }
        });
    (hostile_value(), prop::collection::vec(flag, 0..8)).prop_map(|(question, flags)| {
        let mut argv = vec![OsString::from("rlm"), OsString::from("ask"), question];
        argv.extend(flags.into_iter().flatten());
        argv
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_ask_command_line_is_accepted_or_refused_in_one_line(argv in ask_argv()) {
        let Ok(cli) = Cli::try_parse_from(&argv) else {
            // clap's own error: a message, not a panic.
            return Ok(());
        };
        let Command::Ask(args) = cli.command else {
            prop_assert!(false, "ask parsed as another command: {argv:?}");
            unreachable!()
        };
        match crate::commands::ask::check_question(&args) {
            Ok(_) => {}
            Err(e) => {
                // As `main` prints it.
                let text = crate::commands::display::error_line(&e);
                prop_assert!(!text.trim().is_empty());
                prop_assert!(
                    !text.chars().any(char::is_control),
                    "one line, no control characters: {text:?}"
                );
            }
        }
        // The model settings resolve or refuse the same way.
        if let Ok(overrides) = args.llm.overrides() {
            let _ = rlm_llm::LlmConfig::load(&overrides);
        }
    }
}

#[test]
fn the_fuzzed_flags_are_the_real_ones() {
    let flags = ask_flags();
    for expected in [
        "--max-wall-secs",
        "--max-llm-calls",
        "--verify",
        "--offline",
    ] {
        assert!(
            flags.iter().any(|(name, _)| name == expected),
            "{expected} in {flags:?}"
        );
    }
}

#[test]
fn hostile_numbers_in_ask_flags_are_refused_not_accepted() {
    for value in ["NaN", "inf", "-1", "1e400"] {
        let flag = format!("--max-wall-secs={value}");
        let cli = Cli::try_parse_from(["rlm", "ask", "q", flag.as_str()])
            .expect("the value is a string to clap");
        let Command::Ask(args) = cli.command else {
            unreachable!()
        };
        let err = crate::commands::ask::check_question(&args)
            .err()
            .unwrap_or_else(|| panic!("--max-wall-secs={value} was accepted"));
        assert!(err.to_string().contains("--max-wall-secs"), "{err}");
    }
}

/// Found by the long run: a path holding a newline (here `--config "\n"`)
/// made the error two lines; it is printed escaped.
#[test]
fn a_path_with_a_newline_is_shown_escaped_in_the_error() {
    let cli = Cli::try_parse_from(["rlm", "ask", "q", "--config", "bad\nname\u{1b}[31m"])
        .expect("any path parses");
    let Command::Ask(args) = cli.command else {
        unreachable!()
    };
    let err = crate::commands::ask::check_question(&args).expect_err("no such file");
    let line = crate::commands::display::error_line(&err);
    assert!(line.contains("bad\\nname\\u{1b}[31m"), "{line}");
    assert!(!line.chars().any(char::is_control), "{line:?}");
}
