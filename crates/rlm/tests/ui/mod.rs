//! Support for the browser tests of the web UI (`tests/ui_browser.rs`): a
//! WebDriver client, the real `rlm serve`, and axe-core for the
//! accessibility check (axe-core 4.14.1 from npm, MPL-2.0, used by the test
//! only: `axe-core-4.14.1.min.js` is injected into the page under test and
//! never shipped with it).

#![allow(dead_code)] // not every helper is used by every test

pub mod server;
pub mod webdriver;

/// axe-core's `axe.min.js`, injected into the page by the accessibility test.
pub const AXE: &str = include_str!("axe-core-4.14.1.min.js");
