//! The dashboard: what the assistant runs on and what it is doing now.

use super::layout::page;
use crate::backstage::Overview;
use maud::{Markup, html};
use std::time::Duration;

pub fn render(overview: &Overview, signed_in: bool) -> Markup {
    page(
        "Dashboard",
        "/",
        signed_in,
        html! {
            h1 { "Dashboard" }
            dl.facts {
                dt { "Model" } dd #model { (overview.model) }
                dt { "Provider" } dd #provider { (overview.provider) }
                dt { "Channels" } dd #channels { (overview.channels.join(", ")) }
                dt { "Uptime" } dd #uptime { (uptime(overview.uptime)) }
                dt { "Turns running" } dd #running-turns { (overview.running_turns) }
            }
            h2 { "Background tasks" }
            @match &overview.tasks {
                None => p { "Background tasks are off (" code { "[tasks] enabled = false" } ")." },
                Some(tasks) => {
                    dl.facts {
                        dt { "Queue" } dd #queue-backend { (tasks.backend) }
                        dt { "Waiting" } dd #queue-depth { (tasks.queued.map_or("unknown".to_string(), |n| n.to_string())) }
                        dt { "Running" } dd #tasks-running { (tasks.running) }
                    }
                    h3 { "Workers online (" (tasks.workers.len()) ")" }
                    @if tasks.workers.is_empty() {
                        p { "None right now. Local workers start with the next task." }
                    } @else {
                        table #workers {
                            thead { tr { th { "Worker" } th { "Host" } th { "Serves" } th { "Running" } } }
                            tbody {
                                @for worker in &tasks.workers {
                                    tr {
                                        td { code { (worker.id) } }
                                        td { (worker.host) }
                                        td { (worker.agents.join(", ")) }
                                        td { (worker.load) " of " (worker.capacity) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "MCP servers" }
            @if overview.mcp.is_empty() {
                p { "None configured." }
            } @else {
                table #mcp-servers {
                    thead { tr { th { "Server" } th { "State" } th { "Tools" } } }
                    tbody {
                        @for server in &overview.mcp {
                            tr { td { (server.name) } td { (server.state) } td { (server.tools) } }
                        }
                    }
                }
            }
            h2 { "Tools (" (overview.tools.len()) ")" }
            ul.tools #tools { @for tool in &overview.tools { li { code { (tool) } } } }
        },
    )
}

/// `3 d 4 h`, `2 h 5 min`, `42 s`.
fn uptime(elapsed: Duration) -> String {
    let s = elapsed.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h {} min", s / 3600, s % 3600 / 60),
        _ => format!("{} d {} h", s / 86400, s % 86400 / 3600),
    }
}
