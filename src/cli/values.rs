//! The values a flag takes, named to clap: its shell completions offer them (not file
//! names), and `--help` and the man pages list them.
//!
//! Owns: [`Listed`], a parser that keeps the text as typed (the command checks it, as
//! before, with its own message) and only lists the values; and the lists of `--format`,
//! `--kind`, `--mode` and `--toolsets`. Must not: decide what a value means (`--kind` and
//! `--toolsets` take comma-separated lists, read by their commands).

pub(super) use clap::builder::TypedValueParser;
use clap::builder::{PossibleValue, StringValueParser};
use std::ffi::OsStr;

/// A flag's text as typed, with the values it takes listed for completions and help.
#[derive(Clone)]
pub(super) struct Listed {
    /// The values, in the order they are offered.
    values: fn() -> Vec<&'static str>,
}

impl Listed {
    /// `export --format`: every rendering, then `otlp`.
    pub(super) fn formats() -> Self {
        Listed {
            values: || {
                let renderings = crate::export::Format::ALL.iter().map(|f| f.as_str());
                renderings.chain(["otlp"]).collect()
            },
        }
    }

    /// `--kind` of `search` and `sessions`: the registered session kinds.
    pub(super) fn kinds() -> Self {
        Listed {
            values: || {
                crate::tools::session_kinds()
                    .map(|info| info.kind.as_str())
                    .collect()
            },
        }
    }

    /// `search --mode`.
    pub(super) fn search_modes() -> Self {
        Listed {
            values: || {
                let modes = crate::recall::SearchMode::ALL.iter();
                modes.map(|mode| mode.as_str()).collect()
            },
        }
    }

    /// `serve --toolsets`: every toolset of this build, and `all`.
    pub(super) fn toolsets() -> Self {
        Listed {
            values: || {
                let sets = crate::tools::Toolset::available().into_iter();
                sets.map(|set| set.as_str()).chain(["all"]).collect()
            },
        }
    }
}

impl TypedValueParser for Listed {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(command, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            (self.values)().into_iter().map(PossibleValue::new),
        ))
    }
}
