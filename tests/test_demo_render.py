"""The demo's pure parts: events to coloured spans, statistics and plot frames (specdec/demo/render.py),
the settings check and the batched run through a real LocalBackend (specdec/demo/runs.py and
specdec/serving/local.py, over a fake engine: pure thread logic),
and the Teach view's computations (specdec/demo/teach.py, through the real verifier)."""

from __future__ import annotations

import html
import re
import threading
import time

import pytest

from specdec.core.config import ConfigError, GenerateSpec
from specdec.core.events import Piece, Stats, StepEvent
from specdec.core.theory import expected_tokens, optimal_k, speedup
from specdec.demo import race as RC
from specdec.demo import render as R
from specdec.demo import stats as S
from specdec.demo import teach as T
from specdec.demo.runs import DemoSession, Run, check_prompt, make_spec
from specdec.serving.backend import Request
from specdec.serving.local import LocalBackend


def _event(step: int, pieces: list[Piece], drafted: int, stop: str | None = None) -> StepEvent:
    st = Stats()
    st.record(
        list(range(1, drafted + 1)),
        [],
        [pc.position for pc in pieces if pc.kind == "accepted"],
        sum(pc.emitted for pc in pieces),
    )
    return StepEvent(step, tuple(pieces), st, {"propose": 1.0, "score": 4.0, "verify": 0.5}, drafted, stop)


def _steps() -> list[StepEvent]:
    return [
        _event(
            1,
            [
                Piece(10, "def", "accepted", 1, 1, 0.9, 0.8),
                Piece(11, " f", "rejected", 1, 2, 0.1, 0.7),
                Piece(12, " g", "recovered", 1, 2),
            ],
            drafted=3,
        ),
        _event(2, [Piece(13, "(", "accepted", 2, 1, 1.0, 1.0), Piece(14, "x", "bonus", 2, 2)], drafted=1),
        _event(3, [Piece(15, "<&>", "plain", 3, 0)], drafted=0, stop="length"),
    ]


# -- spans ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kind, colour",
    [("accepted", "#c8f7c5"), ("rejected", "line-through"), ("recovered", "#ffe0b2"), ("bonus", "#cfe3ff")],
)
def test_each_fate_has_its_own_colour(kind, colour):
    span = R.piece_span(Piece(7, "tok", kind, 3, 2, 0.25, 0.5))
    assert f'data-kind="{kind}"' in span and f"sd-{kind}" in span
    rules = dict(re.findall(r"\.sd-tok\.sd-(\w+)\{([^}]*)\}", R.kind_css()))
    assert colour in rules[kind] and all(colour not in v for k, v in rules.items() if k != kind)


def test_plain_tokens_are_neutral():
    rules = dict(re.findall(r"\.sd-tok\.sd-(\w+)\{([^}]*)\}", R.kind_css()))
    assert "background" not in rules["plain"]


def test_inspector_info_gives_step_position_p_and_q():
    span = R.piece_span(Piece(7, "tok", "accepted", 3, 2, 0.25, 0.5))
    info = html.unescape(re.search(r'data-info="([^"]*)"', span).group(1))
    assert "step 3" in info and "draft position 2" in info and "p=0.250" in info and "q=0.500" in info
    plain = html.unescape(re.search(r'data-info="([^"]*)"', R.piece_span(Piece(7, "t", "plain", 4, 0))).group(1))
    assert "step 4" in plain and "p=" not in plain and 'tabindex="0"' in span


def test_text_is_escaped_and_whitespace_rejections_stay_visible():
    assert "&lt;script&gt;" in R.piece_span(Piece(1, "<script>", "accepted", 1, 1))
    assert R.visible_text(Piece(1, "\n    ", "rejected", 1, 1)) == "\u23ce\u24234"
    assert R.visible_text(Piece(1, "\n    ", "accepted", 1, 1)) == "\n    "  # emitted text is never altered


def test_transcript_renders_every_piece_in_order_and_joins_emitted_text():
    t = R.Transcript(prompt="# p\n").extend(_steps())
    out = R.transcript_html(t, "done")
    assert re.findall(r'data-kind="(\w+)"', out) == ["accepted", "rejected", "recovered", "accepted", "bonus", "plain"]
    assert t.text == "def g(x<&>" and t.token_ids == [10, 12, 13, 14, 15]
    assert "# p" in out and "done" in out
    assert t.kinds == {"accepted", "rejected", "recovered", "bonus", "plain"}


# -- statistics and plot frames ----------------------------------------------------------------
def test_stats_summary_and_cards():
    st = Stats(steps=4, target_forwards=4, drafted=8, accepted=6, emitted=10, elapsed_s=0.5)
    s = R.stats_summary(st)
    assert s == {
        "tokens/s": "20.0",
        "tau": "2.50",
        "alpha": "0.75",
        "target forwards": "4",
        "steps": "4",
        "tokens": "10",
    }
    cards = R.stats_html(st)
    assert all(f'data-stat="{k}"' in cards for k in s)
    assert R.stats_summary(None)["tau"] == "-"


def test_frames_per_step_and_position():
    t = R.Transcript().extend(_steps())
    acc = S.step_frame(t)
    got = {(r.step, r.series): r.tokens for r in acc.itertuples()}
    # step 1 drafted 3: one accepted, one rejected (struck in the stream), one never tested
    assert got[(1, "accepted")] == 1 and got[(1, "rejected")] == 1 and got[(1, "untested")] == 1
    assert got[(2, "accepted")] == 1 and got[(2, "rejected")] == 0
    alpha = R.alpha_frame(t)
    assert list(alpha.step) == [1, 2, 3] and list(alpha.alpha) == pytest.approx([1 / 3, 2 / 4, 2 / 4])
    assert set(S.step_frame(R.Transcript()).series) == {"accepted", "rejected", "untested"}  # legend fixed


def test_position_acceptance_is_conditional_on_being_tested():
    """Defect 6: depth 3 was drafted twice but never tested; it showed as 0 (never accepted)."""
    st = Stats(drafted_at=[4, 4, 2], tested_at=[4, 1, 0], accepted_at=[3, 1, 0])
    pos = S.position_frame(st)
    assert list(pos.position) == [" 1", " 2"]  # untested depth 3 has no bar
    assert list(pos.alpha_i) == pytest.approx([0.75, 1.0]) and list(pos.tested) == [4, 1]
    assert "depth 1: 3/4 = 0.75; depth 2: 1/1 = 1.00" in S.position_counts(st)
    assert "depth 3" not in S.position_counts(st) and "No draft token tested" in S.position_counts(None)
    assert S.position_frame(None).empty
    assert S.position_label(10) > S.position_label(9)  # depth 10 sorts after depth 9


def test_method_note_says_what_k_means_and_why_tokens_are_plain():
    """Defect 7: auto's choice, the draft's confidence stop and k as tree nodes were never said."""
    t = R.Transcript().extend(_steps())
    draft = S.method_note("draft", "auto", 0.2, t)
    assert "confidence" in draft and "0.2" in draft and "auto picks" in draft
    assert "0 to 3 drafted per step" in draft and "1 of 3 steps drafted nothing" in draft
    assert "tree nodes" in S.method_note("medusa", "auto", 0.2, t) and "depth" in S.method_note("eagle", 4, 0.2, t)
    assert "no n-gram" in S.method_note("lookup", 4, 0.2, t) and "ignored" in S.method_note("none", "auto", 0.2, t)


def test_api_payload_carries_pieces_text_and_stats():
    t = R.Transcript().extend(_steps())
    d = R.api_payload(t, done=True)
    assert [p["kind"] for p in d["pieces"]][:3] == ["accepted", "rejected", "recovered"]
    assert {"text", "kind", "step", "position", "p", "q", "token_id"} <= set(d["pieces"][0])
    assert d["text"] == t.text and d["done"] is True and d["stop"] == "length" and "tau" in d["stats"]


def test_cost_ratio_from_timings():
    t = R.Transcript().extend(_steps())  # propose 3 ms over 4 drafted; score 12 ms over 3 steps
    assert R.cost_ratio(t) == pytest.approx((3.0 / 4) / (12.0 / 3))
    assert R.cost_ratio(R.Transcript().extend([_steps()[2]])) is None


def test_race_verdict_compares_tokens():
    assert RC.race_verdict([1, 2, 3], [1, 2, 3], 0.0)[0] is True
    same, text = RC.race_verdict([1, 2, 3], [1, 2, 4], 0.0)
    assert not same and "token 2" in text and "bug" in text
    assert RC.race_verdict([1, 2], [1, 3], 0.8)[0] is False


# -- settings and the batched run through the backend ----------------------------------------------
class FakeTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) for c in text]


class FakeEngine:
    """Pure-logic stand-in: a stream of n plain steps that records who pulled and closed it."""

    methods = ("none", "draft")
    context = 64
    tokenizer = FakeTokenizer()

    def __init__(self, n: int = 50, delay: float = 0.0, fail_at: int | None = None) -> None:
        self.n, self.delay, self.fail_at = n, delay, fail_at
        self.pulled_in: set[int] = set()
        self.closed_in: int | None = None
        self.steps = 0

    def stream(self, prompt, spec, corpus=(), tenant=None):
        try:
            for i in range(1, self.n + 1):
                self.pulled_in.add(threading.get_ident())
                if i == self.fail_at:
                    raise ConfigError(f"boom at step {i}")
                time.sleep(self.delay)
                self.steps = i
                yield _event(i, [Piece(i, "x", "plain", i, 0)], 0, "length" if i == self.n else None)
        finally:
            self.closed_in = threading.get_ident()


SPEC = GenerateSpec(method="none")


def _run(engine, stop=None, **kw) -> Run:
    return Run(LocalBackend(engine), "p", SPEC, stop, **kw)


def test_make_spec_checks_against_the_engine():
    e = LocalBackend(FakeEngine())
    spec = make_spec(e, "draft", "3", 0.5, 0.9, 12.0, 7.0)
    assert spec.k == 3 and spec.max_new_tokens == 12 and spec.sampling.seed == 7 and spec.sampling.top_p == 0.9
    assert make_spec(e, "none", "auto", 0.0, 1.0, 5, None).k == "auto"
    for args, msg in [
        (("lookup", "auto", 0, 1, 5, 0), "not available"),
        (("draft", "99", 0, 1, 5, 0), "k must"),
        (("draft", "x", 0, 1, 5, 0), "k must"),
        (("draft", 2, -1.0, 1, 5, 0), "temperature"),
        (("draft", 2, 0, 0.0, 5, 0), "top_p"),
        (("draft", 2, 0, 1, 65, 0), "max_new_tokens"),
        (("draft", 2, 0, 1, 0, 0), "max_new_tokens"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            make_spec(e, *args)
    with pytest.raises(ConfigError, match="empty"):
        check_prompt("   \n")


def test_the_backend_pulls_and_closes_in_one_model_thread():
    e = FakeEngine(n=20)
    events = [ev for batch in _run(e).batches() for ev in batch]
    assert [ev.step for ev in events] == list(range(1, 21))
    assert len(e.pulled_in) == 1 and e.closed_in in e.pulled_in and threading.get_ident() not in e.pulled_in


def test_stop_event_halts_between_steps_and_closes_the_stream():
    e, stop = FakeEngine(n=1000, delay=0.002), threading.Event()
    run = _run(e, stop, min_interval_s=0.0)
    seen = 0
    for batch in run.batches():
        seen += len(batch)
        stop.set()
    # the step in flight when the cancel arrived is computed but never delivered
    assert run.stopped_early and e.closed_in in e.pulled_in and e.steps - 1 <= seen <= e.steps < 1000


def test_consumer_leaving_halts_the_worker():
    e = FakeEngine(n=1000, delay=0.002)
    it = _run(e, min_interval_s=0.0).batches()
    next(it)
    it.close()  # what gradio does on cancel or disconnect
    deadline = time.monotonic() + 10
    while e.closed_in is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert e.closed_in is not None and e.steps < 1000


def test_engine_errors_reach_the_consumer():
    with pytest.raises(ConfigError, match="boom at step 3"):
        for _ in _run(FakeEngine(fail_at=3)).batches():
            pass


def test_stop_while_queued_never_starts_the_request():
    e, stop = FakeEngine(n=200, delay=0.002), threading.Event()
    backend = LocalBackend(e)
    first = backend.submit(Request("p", SPEC))
    run = Run(backend, "q", SPEC, stop, min_interval_s=0.0)
    stop.set()
    assert list(run.batches()) == [] and run.stopped_early
    assert [ev.step for ev in first][-1] == 200  # the running request was not disturbed


def test_each_session_copy_is_independent():
    import copy

    a = DemoSession()
    b = copy.deepcopy(a)
    a.stop.set()
    a.runs.append(None)
    assert not b.stop.is_set() and b.runs == []


# -- Teach -------------------------------------------------------------------------------------
def test_theory_figure_plots_the_closed_form_and_the_runs():
    from specdec.demo.runs import RunRecord

    runs = [RunRecord("draft", "auto", 0.6, 2.0, 100.0, 1.3, 0.1), RunRecord("none", "auto", None, 1.0, 90.0)]
    fig = T.theory_figure(0.7, 4, 0.1, runs)
    curves = {tr.name: tr for tr in fig.data}
    tau = curves["theory, k=4"]
    assert tau.y[50] == pytest.approx(expected_tokens(0.5, 4))
    assert curves["theory, k=4, c=0.10"].y[80] == pytest.approx(speedup(0.8, 4, 0.1))
    assert list(curves["your runs (tau)"].x) == [0.6] and list(curves["your races (speedup)"].y) == [1.3]
    assert "2.77 tokens per target forward" in T.theory_text(0.7, 4, 0.1)
    k, s = optimal_k(0.7, 0.1, 16)
    assert k > 0 and f"best k for this alpha and c is **{k}** ({s:.2f}x)" in T.theory_text(0.7, 4, 0.1)
    # alpha <= c: no k beats plain decoding, and the page says so instead of naming a k
    assert optimal_k(0.2, 0.5, 16)[0] == 0
    text = T.theory_text(0.2, 4, 0.5)
    assert "No k pays" in text and "k = 0" in text and "best k for" not in text


def test_parse_weights():
    assert T.parse_weights("1, 1, 2", "p") == [0.25, 0.25, 0.5]
    for bad in ["", "1", "a, b", "1, -1", "0, 0", ",".join(["1"] * 13)]:
        with pytest.raises(ConfigError):
            T.parse_weights(bad, "p")


def test_monte_carlo_through_the_verifier_converges_to_p():
    p, q = T.parse_weights("5, 3, 1, 1, 0", "p"), T.parse_weights("1, 1, 3, 3, 2", "q")
    states = list(T.monte_carlo(p, q, 4000, seed=1))
    last = states[-1]
    assert [s.n for s in states] == [10, 30, 100, 300, 1000, 3000, 4000]
    assert sum(last.counts) == 4000 and last.counts[4] == 0  # p(t4) = 0: never emitted, though q proposes it
    assert T.tv(last.empirical(), p) < 0.04 < T.tv(q, p)
    assert last.accepted / last.n == pytest.approx(sum(min(a, b) for a, b in zip(p, q)), abs=0.04)
    acc, res = last.split()
    assert [a + r for a, r in zip(acc, res)] == pytest.approx(last.empirical())
    for a, r, pi, qi in zip(acc, res, p, q):  # the two parts converge to min(p, q) and max(p - q, 0)
        assert a == pytest.approx(min(pi, qi), abs=0.04) and r == pytest.approx(max(pi - qi, 0.0), abs=0.04)
    fig = T.mc_figure(last, p, q)
    names = {tr.name for tr in fig.data}
    assert {"emitted by acceptance ~ min(p, q)", "emitted from the residual ~ max(p - q, 0)", "draft q"} <= names
    band = next(tr for tr in fig.data if tr.name.startswith("target p")).error_y.array
    assert band[0] == pytest.approx(1.96 * (p[0] * (1 - p[0]) / 4000) ** 0.5)


def test_only_the_prompt_tail_is_shown():
    assert R.prompt_tail("a\nb") == "a\nb"
    assert R.prompt_tail("1\n2\n3\n4\n5\n6", lines=4) == "\u2026\n3\n4\n5\n6"


def test_a_run_delivers_the_last_events_however_the_end_arrives():
    """The request ends between two polls: the events that came with the end are still shown."""
    last = _event(1, [Piece(1, "x", "plain", 1, 0)], 0, "length")

    class Scripted:  # a handle whose polls return: nothing yet, then the last event with the end
        ended, error, stop = False, None, "length"

        def __init__(self):
            self.replies = [([], False), ([last], True)]

        def next_batch(self, timeout=None):
            reply = self.replies.pop(0)
            self.ended = reply[1]
            return reply

        def cancel(self, reason="cancelled"):
            raise AssertionError("a finished run is not cancelled")

        def started(self):
            return True

    class Backend:
        def submit(self, request):
            return Scripted()

    assert list(Run(Backend(), "p", SPEC, min_interval_s=0.0).batches()) == [[last]]


def test_stop_acts_even_while_the_page_does_not_pull():
    """Stop pressed while the consumer is busy elsewhere: the engine stops within a step or two,
    not when the page comes back for its next update."""
    e, stop = FakeEngine(n=1000, delay=0.005), threading.Event()
    run = _run(e, stop, min_interval_s=0.0)
    it = run.batches()
    next(it)
    stop.set()
    deadline = time.monotonic() + 10
    while e.closed_in is None and time.monotonic() < deadline:
        time.sleep(0.01)  # not pulling
    assert e.closed_in is not None and e.steps < 1000 and run.stopped_early
    it.close()
