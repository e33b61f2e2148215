//! One frame of `top`, drawn from an [`App`]: two header lines of totals,
//! the servers' table (or the selected server's log and calls), the
//! selected server's sandbox and last stderr line, a message line and the
//! keys. Fits 80×24; without colour the selection is the `>` marker.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table};
use ratatui::Frame;

use super::app::{App, Mode};
use super::model::Row;
use crate::telemetry::RecentCall;

const HEADER: [&str; 12] = ["  NAME", "STATE", "PID", "UP", "RST", "RUN/Q", "CALL/S", "P50ms", "P99ms", "ERR", "CPU%", "RSS"];
const WIDTHS: [u16; 12] = [11, 9, 7, 5, 3, 5, 6, 5, 5, 4, 4, 5];

pub fn draw(frame: &mut Frame, app: &App) {
    // Two lines about the selected server, more for its callers and while tools of it are withheld.
    let about = app.selected_row().map(about_selected).unwrap_or_default();
    let [title, totals, body, selected, message, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(about.len().max(2) as u16),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let bold = if app.colour { Style::new().add_modifier(Modifier::BOLD) } else { Style::new() };
    let filter = match (app.mode, app.filter.is_empty()) {
        (Mode::Filter, _) => format!("filter: {}_", app.filter),
        (_, true) => "filter: none".to_string(),
        (_, false) => format!("filter: {}", app.filter),
    };
    let heading = format!("mcpvisor top - {} - sort: {} - {filter}", app.source, app.sort.label());
    frame.render_widget(Paragraph::new(Line::styled(heading, bold)), title);
    let t = &app.totals;
    let line = format!(
        "{} servers ({} up): {:.1} calls/s, {} run, {} queued, {} errors, {} restarts, {} RSS",
        t.servers,
        t.connected,
        t.calls_per_second,
        t.in_flight,
        t.queued,
        t.errors,
        t.restarts,
        bytes(Some(t.rss_bytes))
    );
    frame.render_widget(Paragraph::new(line), totals);
    match app.mode {
        Mode::Detail => draw_detail(frame, app, body),
        _ => draw_table(frame, app, body),
    }
    frame.render_widget(Paragraph::new(about.into_iter().map(Line::from).collect::<Vec<_>>()), selected);
    frame.render_widget(Paragraph::new(app.message.clone().unwrap_or_default()), message);
    let help = match app.mode {
        Mode::Table => "q quit  s sort  / filter  j/k move  enter log  r restart  e enable  d disable",
        Mode::Filter => "type to filter by name or state  enter keep  esc clear",
        Mode::Detail => "esc back  q quit  r restart  e enable  d disable",
    };
    frame.render_widget(Paragraph::new(Line::styled(help, bold)), keys);
}

fn draw_table(frame: &mut Frame, app: &App, area: Rect) {
    let highlight = if app.colour { Style::new().add_modifier(Modifier::REVERSED) } else { Style::new() };
    let rows = app.rows.iter().map(|row| {
        let chosen = app.selected.as_ref() == Some(&row.name);
        let cells = cells(row, chosen);
        TableRow::new(cells.into_iter().map(Cell::from)).style(if chosen { highlight } else { Style::new() })
    });
    let widths = WIDTHS.iter().enumerate().map(|(i, w)| if i == 0 { Constraint::Min(*w) } else { Constraint::Length(*w) });
    let header = TableRow::new(HEADER.iter().enumerate().map(|(i, title)| Cell::from(align(i, title.to_string()))));
    let header = if app.colour { header.style(Style::new().add_modifier(Modifier::BOLD | Modifier::UNDERLINED)) } else { header };
    let mut table = Table::new(rows, widths).header(header).column_spacing(1);
    if app.rows.is_empty() {
        table = table.footer(TableRow::new([Cell::from(if app.filter.is_empty() { "  (no servers)" } else { "  (no server matches)" })]));
    }
    frame.render_widget(table, area);
}

/// A row's cells, numbers right-aligned by padding to their column.
fn cells(row: &Row, chosen: bool) -> Vec<String> {
    let marker = if chosen { "> " } else { "  " };
    let pid = row.pid.map_or("-".into(), |pid| pid.to_string());
    let texts = [
        format!("{marker}{}", row.name),
        short_state(&row.state).to_string(),
        pid,
        row.uptime_s.map_or("-".into(), duration),
        row.restarts.to_string(),
        format!("{}/{}", row.in_flight, row.queued),
        format!("{:.1}", row.calls_per_second),
        millis(row.p50_ms),
        millis(row.p99_ms),
        row.errors.to_string(),
        row.cpu_percent.map_or("-".into(), |cpu| format!("{cpu:.0}")),
        bytes(row.rss_bytes),
    ];
    texts.into_iter().enumerate().map(|(i, text)| align(i, text)).collect()
}

/// Column `i`'s text: names and states to the left, numbers to the right.
fn align(i: usize, text: String) -> String {
    if i < 2 {
        text
    } else {
        format!("{text:>w$}", w = WIDTHS[i] as usize)
    }
}

/// State labels that fit their column.
fn short_state(state: &str) -> &str {
    match state {
        "restarting" => "restart",
        "needs_auth" => "need auth",
        other => other,
    }
}

/// The selected server's sandbox, last reason, callers, pending tool changes and last stderr line.
fn about_selected(row: &Row) -> Vec<String> {
    let mut first = format!("{}: sandbox {}", row.name, row.sandbox.as_deref().unwrap_or("none"));
    if let Some(reason) = &row.last_reason {
        first.push_str(&format!(" | last: {reason}"));
    }
    let mut lines = vec![first];
    if let Some(callers) = &row.callers {
        lines.push(format!("callers {callers}"));
    }
    if !row.withheld.is_empty() {
        let tools = row.withheld.join(", ");
        lines.push(format!("withheld, changed since pinned: {tools} (`mcpvisor tools --accept {}` shows the change)", row.name));
    }
    lines.push(format!("stderr: {}", row.last_stderr.as_deref().unwrap_or("-")));
    lines
}

fn draw_detail(frame: &mut Frame, app: &App, area: Rect) {
    let Some(row) = app.selected_row() else { return };
    let sample = app.latest.servers.iter().find(|s| s.name == row.name);
    let tail = sample.map(|s| s.stderr_tail.as_slice()).unwrap_or_default();
    let calls: Vec<&RecentCall> = app.latest.calls.iter().filter(|c| c.server == row.name).collect();
    // Half the lines for the log, the rest for the calls, newest first:
    // whatever does not fit is the oldest.
    let room = usize::from(area.height);
    let log_room = (room.saturating_sub(2) / 2).max(1);
    let mut lines = vec![Line::from(format!("{} - {} - stderr, last {} lines:", row.name, row.state, tail.len().min(log_room)))];
    lines.extend(tail[tail.len().saturating_sub(log_room)..].iter().map(|l| Line::from(format!("  {l}"))));
    lines.push(Line::from(format!("recent calls ({} kept, newest first):", calls.len())));
    let call_room = room.saturating_sub(lines.len());
    for call in calls.iter().rev().take(call_room) {
        lines.push(Line::from(format!(
            "  {} {:<24} {:<12} {:>9.1} ms",
            clock(call.ended_at_ms),
            call.tool,
            call.outcome,
            call.duration_ms
        )));
    }
    frame.render_widget(Paragraph::new(lines), area);
}

/// `HH:MM:SS` (UTC) of Unix milliseconds.
fn clock(ms: u64) -> String {
    let seconds = (ms / 1000) % 86_400;
    format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60)
}

fn millis(ms: Option<f64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) if ms < 10.0 => format!("{ms:.1}"),
        Some(ms) if ms < 100_000.0 => format!("{ms:.0}"),
        Some(ms) => format!("{:.0}s", ms / 1000.0),
    }
}

fn duration(seconds: f64) -> String {
    let s = seconds as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

pub fn bytes(bytes: Option<u64>) -> String {
    let Some(bytes) = bytes else { return "-".into() };
    let units = [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    match units.iter().find(|(size, _)| bytes >= *size) {
        Some((size, unit)) if bytes / size < 10 => format!("{:.1}{unit}", bytes as f64 / *size as f64),
        Some((size, unit)) => format!("{}{unit}", bytes / size),
        None => format!("{bytes}B"),
    }
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;
    use ratatui::style::Modifier;
    use ratatui::Terminal;
    use serde_json::json;

    use super::super::app::App;
    use super::super::model::Sample;

    /// The selected row's line on an 80×24 screen, and whether it is in reverse video.
    fn selected_line(colour: bool) -> (String, bool) {
        let mut app = App::new("test", colour);
        let servers = ["alpha", "beta"].map(|name| json!({"name": name, "state": "connected", "pid": 4242}));
        app.update(None, Sample::parse(&json!({"servers": servers})));
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        terminal.draw(|frame| super::draw(frame, &app)).unwrap();
        let buffer = terminal.backend().buffer();
        let y = (0..24).find(|y| buffer[(0, *y)].symbol() == ">").expect("a selected row");
        let line: String = (0..80).map(|x| buffer[(x, y)].symbol()).collect();
        (line, buffer[(2, y)].modifier.contains(Modifier::REVERSED))
    }

    #[test]
    fn the_selection_is_a_marker_and_reverse_video_only_with_colour() {
        let (line, reversed) = selected_line(true);
        assert!(line.starts_with("> alpha") && line.contains("4242"), "{line}");
        assert!(reversed);
        let (line, reversed) = selected_line(false);
        assert!(line.starts_with("> alpha"), "{line}");
        assert!(!reversed, "NO_COLOR: the marker alone shows the selection");
    }

    #[test]
    fn the_newest_calls_show_first_and_fit_an_80_by_24_screen() {
        let mut app = App::new("test", false);
        let tail: Vec<String> = (0..50).map(|i| format!("log line {i}")).collect();
        let servers = [json!({"name": "alpha", "state": "connected", "pid": 1, "stderr_tail": tail})];
        let calls: Vec<_> = (0..40)
            .map(
                |i| json!({"server": "alpha", "tool": format!("tool{i:02}"), "outcome": "ok", "duration_ms": 1.0, "ended_at_ms": 1000 * i}),
            )
            .collect();
        app.update(None, Sample::parse(&json!({"servers": servers, "calls": calls})));
        app.key(ratatui::crossterm::event::KeyEvent::new(
            ratatui::crossterm::event::KeyCode::Enter,
            ratatui::crossterm::event::KeyModifiers::NONE,
        ));
        let mut terminal = Terminal::new(TestBackend::new(80, 24)).unwrap();
        terminal.draw(|frame| super::draw(frame, &app)).unwrap();
        let buffer = terminal.backend().buffer();
        let screen: Vec<String> = (0..24).map(|y| (0..80).map(|x| buffer[(x, y)].symbol()).collect()).collect();
        let heading = screen.iter().position(|line| line.starts_with("recent calls")).expect("the calls' heading");
        assert!(screen[heading + 1].contains("tool39"), "the newest call comes first: {screen:#?}");
        assert!(screen[heading + 2].contains("tool38"), "{screen:#?}");
        assert!(screen.iter().any(|line| line.contains("log line 49")), "the newest log line is shown: {screen:#?}");
    }

    #[test]
    fn a_servers_withheld_tools_show_under_the_table_with_what_to_run() {
        let mut app = App::new("test", false);
        let servers = [json!({"name": "tickets", "state": "connected", "withheld": ["lookup"], "stderr_tail": ["ready"]})];
        app.update(None, Sample::parse(&json!({"servers": servers})));
        let mut terminal = Terminal::new(TestBackend::new(120, 24)).unwrap();
        terminal.draw(|frame| super::draw(frame, &app)).unwrap();
        let buffer = terminal.backend().buffer();
        let screen: Vec<String> = (0..24).map(|y| (0..120).map(|x| buffer[(x, y)].symbol()).collect::<String>()).collect();
        let withheld = screen.iter().position(|line| line.contains("withheld, changed since pinned: lookup"));
        let withheld = withheld.unwrap_or_else(|| panic!("no line names the withheld tool:\n{}", screen.join("\n")));
        assert!(screen[withheld].contains("`mcpvisor tools --accept tickets`"), "{}", screen[withheld]);
        assert!(screen[withheld + 1].contains("stderr: ready"), "the stderr line still shows:\n{}", screen.join("\n"));
    }

    #[test]
    fn a_per_caller_servers_callers_show_by_identity() {
        let mut app = App::new("test", false);
        let callers = json!({"connections": 2, "max": 16, "callers": ["issuer:alice", "key:bob"], "started": 2});
        let servers = [json!({"name": "github", "state": "connected", "callers": callers})];
        app.update(None, Sample::parse(&json!({"servers": servers})));
        let mut terminal = Terminal::new(TestBackend::new(120, 24)).unwrap();
        terminal.draw(|frame| super::draw(frame, &app)).unwrap();
        let buffer = terminal.backend().buffer();
        let screen: Vec<String> = (0..24).map(|y| (0..120).map(|x| buffer[(x, y)].symbol()).collect::<String>()).collect();
        assert!(screen.iter().any(|line| line.contains("callers 2/16: issuer:alice, key:bob")), "{}", screen.join("\n"));
        let logging_in = json!({"connections": 1, "max": 64, "callers": ["key:alice"], "logins": 3});
        app.update(None, Sample::parse(&json!({"servers": [{"name": "github", "state": "connected", "callers": logging_in}]})));
        terminal.draw(|frame| super::draw(frame, &app)).unwrap();
        let buffer = terminal.backend().buffer();
        let screen: Vec<String> = (0..24).map(|y| (0..120).map(|x| buffer[(x, y)].symbol()).collect::<String>()).collect();
        assert!(screen.iter().any(|line| line.contains("callers 1/64: key:alice (3 stored logins)")), "{}", screen.join("\n"));
    }

    #[test]
    fn sizes_and_times_are_short() {
        assert_eq!(
            [super::bytes(Some(512)), super::bytes(Some(3 << 20)), super::bytes(Some(25 << 20)), super::bytes(None)],
            ["512B", "3.0M", "25M", "-"]
        );
        assert_eq!([super::duration(5.0), super::duration(125.0), super::duration(7300.0)], ["5s", "2m", "2h"]);
        assert_eq!([super::millis(Some(2.345)), super::millis(Some(250.0)), super::millis(None)], ["2.3", "250", "-"]);
        assert_eq!(super::clock(3_723_000), "01:02:03");
    }
}
