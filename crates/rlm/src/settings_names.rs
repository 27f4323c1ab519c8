//! The command line and the settings table name settings the same way:
//! every flag with an environment variable is that variable's setting's
//! flag, and every flag the table declares exists on some command.

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use clap::CommandFactory;
    use rlm_settings::table;

    /// Every (long flag, environment variable) of every subcommand.
    fn flags(cmd: &clap::Command, out: &mut Vec<(String, Option<String>, String)>) {
        for arg in cmd.get_arguments() {
            if let Some(long) = arg.get_long() {
                let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
                out.push((format!("--{long}"), env, cmd.get_name().to_string()));
            }
        }
        for sub in cmd.get_subcommands() {
            flags(sub, out);
        }
    }

    #[test]
    fn flags_and_variables_agree_with_the_settings_table() {
        let mut all = Vec::new();
        flags(&crate::Cli::command(), &mut all);
        let mut wrong = Vec::new();
        for (flag, env, command) in &all {
            let Some(env) = env else { continue };
            match table::by_env(env) {
                None => wrong.push(format!(
                    "rlm {command} {flag} reads {env}, which crates/rlm-settings/src/table/ does not declare"
                )),
                Some(s) if s.flag != Some(flag.as_str()) => wrong.push(format!(
                    "rlm {command} {flag} reads {env}, whose setting's flag is {:?}",
                    s.flag
                )),
                Some(_) => {}
            }
        }
        let present: BTreeSet<&str> = all.iter().map(|(f, _, _)| f.as_str()).collect();
        for s in table::ALL {
            if let Some(flag) = s.flag
                && !present.contains(flag)
            {
                wrong.push(format!("{} declares {flag}, which no command has", s.key));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}
