//! `/ui/jobs`: ask where and how to do this much work by a deadline. The
//! form is sent by the script to `POST /v1/jobs` as JSON, like any API
//! client; the answer (the plan or the ranking, and the cost against finish
//! time) is drawn in the page from the JSON it returns.

use axum::response::Response;
use maud::html;

use super::layout;

pub async fn page() -> Response {
    let body = html! {
        h1 { "Jobs" }
        p { "This much work by then, within a budget, in these places: the cheapest plan from the catalog, "
            "every offer ranked, and what finishing sooner costs. Work is in reference GPU-hours "
            "(hours of one H100 SXM unless the reference says otherwise)." }
        form #job-form method="post" action="/v1/jobs" {
            label { "Work (reference GPU-hours) " input name="work" type="number" min="0" step="any" value="2000" required; }
            label { "Deadline (hours from now) " input name="deadline_hours" type="number" min="1" max="2160" step="1" value="96" required; }
            label { "Budget (USD) " input name="budget_usd" type="number" min="0" step="any"; }
            label { "Shape " select name="shape" {
                option value="bag" selected { "bag: independent tasks" }
                option value="gang" { "gang: one cluster" }
            } }
            label { "GPUs (gang) " input name="gpus" type="number" min="1" step="any"; }
            label { "Scaling per doubling (gang) " input name="scaling" type="number" min="0.01" max="1" step="any" placeholder="1"; }
            label { "GPU " input name="gpu" placeholder="H100, A100"; }
            label { "Countries " input name="countries" placeholder="DE, FR, NL"; }
            label { "Perf " input name="perf" placeholder="spec:bf16"; }
            label { "Objective " select name="objective" {
                option value="cost" selected { "cost: cheapest by the deadline" }
                option value="time" { "time: earliest within the budget" }
            } }
            button type="submit" { "Plan the job" }
            p #job-status role="status" {}
        }
        noscript { p { "Planning a job from this page needs JavaScript; "
            code { "gpuplan job --work 2000 --deadline 96h" } " does the same from a shell." } }
        section #job-answer hidden {
            h2 { "The answer" }
            p #job-summary {}
            table #job-plan { thead { tr {} } tbody {} }
            h2 { "Cost against finish time" }
            div.chart id="job-frontier-chart" {}
            p #job-basis {}
        }
    };
    layout("Jobs", "/ui/jobs", &body)
}
