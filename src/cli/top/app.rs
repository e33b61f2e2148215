//! The state of `top` between frames and what each key does to it; the
//! drawing is `view`, the I/O is the module's root.
//!
//! Keys: `q`, Ctrl-C (anywhere) and Esc (in the table; first it clears a
//! kept filter) quit; `s` steps
//! the sort key; `/` starts a filter (Enter keeps it, Esc clears it);
//! ↑/↓ or `k`/`j` move the selection; Enter or `l` opens the selected
//! server's recent log and calls (Esc goes back); `r`, `e`, `d` restart,
//! enable or disable the selected server.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::model::{self, Row, Sample, SortKey, Totals};
use crate::gateway::http::admin::AdminAction;

/// What the screen shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Table,
    /// Typing a filter after `/`.
    Filter,
    /// The selected server's stderr tail and recent calls.
    Detail,
}

/// What a key asks of the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Nothing,
    Quit,
    Act(String, AdminAction),
}

/// Everything a frame is drawn from.
#[derive(Debug, Default)]
pub struct App {
    /// Where the snapshots come from, for the title.
    pub source: String,
    pub sort: SortKey,
    pub filter: String,
    pub mode: Mode,
    /// The selected server, by name (stays on it when rows move).
    pub selected: Option<String>,
    /// The outcome of the last action or refresh problem.
    pub message: Option<String>,
    /// The rows shown: sorted and filtered.
    pub rows: Vec<Row>,
    /// Every row of the latest sample, before the filter.
    all_rows: Vec<Row>,
    pub totals: Totals,
    pub latest: Sample,
    /// Styles (bold, reverse, colour) are used; off with `NO_COLOR`.
    pub colour: bool,
}

impl App {
    pub fn new(source: impl Into<String>, colour: bool) -> App {
        App { source: source.into(), colour, ..App::default() }
    }

    /// Takes a new sample (`before`: the one it replaces, for the rates).
    pub fn update(&mut self, before: Option<&Sample>, now: Sample) {
        let rows = model::rows(before, &now);
        self.totals = model::totals(&rows);
        self.latest = now;
        self.all_rows = rows;
        self.arrange();
    }

    /// Sorts and filters the rows again; keeps the selection on a visible row.
    fn arrange(&mut self) {
        let mut rows = self.all_rows.clone();
        model::filter(&mut rows, &self.filter);
        model::sort(&mut rows, self.sort);
        let visible = |name: &String| rows.iter().any(|row| &row.name == name);
        if !self.selected.as_ref().is_some_and(visible) {
            self.selected = rows.first().map(|row| row.name.clone());
        }
        self.rows = rows;
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.rows.iter().find(|row| Some(&row.name) == self.selected.as_ref())
    }

    fn move_selection(&mut self, by: isize) {
        let at = self.rows.iter().position(|row| Some(&row.name) == self.selected.as_ref()).unwrap_or(0);
        let to = at.saturating_add_signed(by).min(self.rows.len().saturating_sub(1));
        self.selected = self.rows.get(to).map(|row| row.name.clone());
    }

    pub fn key(&mut self, key: KeyEvent) -> Command {
        if key.kind == KeyEventKind::Release {
            return Command::Nothing;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Command::Quit;
        }
        match self.mode {
            Mode::Filter => {
                match key.code {
                    KeyCode::Enter => self.mode = Mode::Table,
                    KeyCode::Esc => {
                        self.filter.clear();
                        self.mode = Mode::Table;
                    }
                    KeyCode::Backspace => {
                        self.filter.pop();
                    }
                    KeyCode::Char(c) if self.filter.chars().count() < MAX_FILTER => self.filter.push(c),
                    _ => {}
                }
                self.arrange();
                Command::Nothing
            }
            Mode::Detail => match key.code {
                KeyCode::Char('q') => Command::Quit,
                KeyCode::Esc | KeyCode::Enter | KeyCode::Char('l') => {
                    self.mode = Mode::Table;
                    Command::Nothing
                }
                _ => self.action(key.code),
            },
            Mode::Table => match key.code {
                KeyCode::Esc if !self.filter.is_empty() => {
                    self.filter.clear();
                    self.arrange();
                    Command::Nothing
                }
                KeyCode::Char('q') | KeyCode::Esc => Command::Quit,
                KeyCode::Char('s') => {
                    self.sort = self.sort.next();
                    self.arrange();
                    Command::Nothing
                }
                KeyCode::Char('/') => {
                    self.mode = Mode::Filter;
                    Command::Nothing
                }
                KeyCode::Up | KeyCode::Char('k') => {
                    self.move_selection(-1);
                    Command::Nothing
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    self.move_selection(1);
                    Command::Nothing
                }
                KeyCode::Enter | KeyCode::Char('l') if self.selected.is_some() => {
                    self.mode = Mode::Detail;
                    Command::Nothing
                }
                code => self.action(code),
            },
        }
    }

    /// `r`, `e` or `d` on the selected server.
    fn action(&mut self, code: KeyCode) -> Command {
        let action = match code {
            KeyCode::Char('r') => AdminAction::Restart,
            KeyCode::Char('e') => AdminAction::Enable,
            KeyCode::Char('d') => AdminAction::Disable,
            _ => return Command::Nothing,
        };
        match &self.selected {
            Some(name) => Command::Act(name.clone(), action),
            None => Command::Nothing,
        }
    }
}

/// The longest filter kept (keys past it are ignored).
const MAX_FILTER: usize = 64;

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    use serde_json::json;

    use super::*;

    fn app() -> App {
        let mut app = App::new("test", false);
        let servers = ["gamma", "alpha", "beta"].map(|name| json!({"name": name, "state": "connected", "pid": 1}));
        app.update(None, Sample::parse(&json!({"servers": servers})));
        app
    }

    fn press(app: &mut App, code: KeyCode) -> Command {
        app.key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn names(app: &App) -> Vec<&str> {
        app.rows.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn keys_sort_filter_select_and_act() {
        let mut app = app();
        assert_eq!(names(&app), ["alpha", "beta", "gamma"]);
        assert_eq!(app.selected.as_deref(), Some("alpha"));
        press(&mut app, KeyCode::Down);
        assert_eq!(press(&mut app, KeyCode::Char('r')), Command::Act("beta".into(), AdminAction::Restart));
        press(&mut app, KeyCode::Char('s'));
        assert_eq!(app.sort, SortKey::CallsPerSecond);
        for c in ['/', 'g', 'a', 'm'] {
            press(&mut app, KeyCode::Char(c));
        }
        assert_eq!((app.mode, names(&app)), (Mode::Filter, vec!["gamma"]));
        assert_eq!(press(&mut app, KeyCode::Char('q')), Command::Nothing, "q is text while filtering");
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Enter);
        assert_eq!((app.mode, app.filter.as_str(), app.selected.as_deref()), (Mode::Table, "gam", Some("gamma")));
        assert_eq!(press(&mut app, KeyCode::Esc), Command::Nothing, "Esc clears a kept filter before it quits");
        assert_eq!((app.filter.as_str(), names(&app).len()), ("", 3));
        for c in ['/', 'g', 'a', 'm'] {
            press(&mut app, KeyCode::Char(c));
        }
        press(&mut app, KeyCode::Enter);
        assert_eq!(press(&mut app, KeyCode::Char('d')), Command::Act("gamma".into(), AdminAction::Disable));
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.mode, Mode::Detail);
        assert_eq!(press(&mut app, KeyCode::Char('e')), Command::Act("gamma".into(), AdminAction::Enable));
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.mode, Mode::Table);
        press(&mut app, KeyCode::Char('/'));
        press(&mut app, KeyCode::Esc);
        assert_eq!((app.filter.as_str(), names(&app).len()), ("", 3), "Esc clears the filter");
        assert_eq!(press(&mut app, KeyCode::Esc), Command::Quit);
        assert_eq!(app.key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Command::Quit);
    }
}
