"""Math answers through math-verify in worker processes: known verdicts, timeouts, caps, no crashes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from verifier.mathcheck import MAX_ANSWER_CHARS, check_math

# (gold, answer, expected verdict)
EQUIVALENT = [
    ("61", "61"),
    ("61", "61.0"),
    ("-3", "-3"),
    ("1000", "1,000"),
    ("\\frac{1}{2}", "0.5"),
    ("\\frac{1}{2}", "1/2"),
    ("\\frac{1}{2}", "\\frac12"),
    ("\\frac{1}{2}", "\\dfrac{1}{2}"),
    ("0.25", "\\frac{1}{4}"),
    ("\\frac{3}{4}", "0.75"),
    ("2", "\\frac{4}{2}"),
    ("\\sqrt{2}", "2^{1/2}"),
    ("\\sqrt{8}", "2\\sqrt{2}"),
    ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}"),
    ("\\pi", "\\pi"),
    ("2\\pi", "\\pi \\cdot 2"),
    ("x^2+2x+1", "(x+1)^2"),
    ("(x+1)(x-1)", "x^2-1"),
    ("3x", "x \\cdot 3"),
    ("e^{2}", "e^2"),
    ("10\\%", "10"),
    ("50\\%", "50\\%"),
    ("5", "x = 5"),
    ("5", "5 apples"),
    ("12", "\\$12"),
    ("[1, 2]", "[1,2]"),
    ("(1, 2]", "(1,2]"),
    ("[0, \\infty)", "[0,\\infty)"),
    ("(-\\infty, 3)", "(-\\infty,3)"),
    ("\\{1, 2, 3\\}", "\\{3, 2, 1\\}"),
    ("1, 2, 3", "3, 2, 1"),
    ("\\frac{1}{3}", "0.333333333"),
    ("1.5", "\\frac{3}{2}"),
    ("1.5", "3/2"),
    ("-\\frac{1}{2}", "-0.5"),
    ("\\frac{-1}{2}", "-\\frac{1}{2}"),
    ("2^{10}", "1024"),
    ("\\binom{5}{2}", "10"),
    ("5!", "120"),
    ("\\sin^2 x + \\cos^2 x", "1"),
    ("\\log_2 8", "3"),
    ("\\ln(e)", "1"),
    ("2^{-1}", "0.5"),
    ("3+4i", "4i+3"),
    ("|{-5}|", "5"),
    ("\\frac{6}{8}", "\\frac{3}{4}"),
    ("0.1", "\\frac{1}{10}"),
    ("1 \\times 10^{3}", "1000"),
    ("\\sqrt{16}", "4"),
    ("\\frac{2}{\\sqrt{2}}", "\\sqrt{2}"),
    ("y = 2x + 1", "y = 1 + 2x"),
    ("\\infty", "\\infty"),
    ("-7", "(-7)"),
    ("\\frac{22}{7}", "22/7"),
    ("4", "4.0000"),
    # units: a unit after the number is ignored, degrees too
    ("5", "5\\text{ cm}"),
    ("5\\text{ m}", "5"),
    ("90^\\circ", "90"),
    ("90", "90^{\\circ}"),
]
DIFFERENT = [
    ("61", "62"),
    ("61", "-61"),
    ("61", "6.1"),
    ("61", "610"),
    ("\\frac{1}{2}", "\\frac{1}{3}"),
    ("\\frac{1}{2}", "2"),
    ("0.5", "0.51"),
    ("0.5", "0.05"),
    ("\\sqrt{2}", "2"),
    ("\\sqrt{2}", "1.41"),
    ("\\pi", "3.14"),
    ("\\pi", "3"),
    ("x^2+2x+1", "(x-1)^2"),
    ("x^2-1", "(x-1)^2"),
    ("3x", "3y"),
    ("3x", "3"),
    ("[1, 2]", "(1, 2)"),
    ("(1, 2]", "[1, 2]"),
    ("(1, 2]", "(1, 2)"),
    ("[0, \\infty)", "(0, \\infty)"),
    ("\\{1, 2, 3\\}", "\\{1, 2\\}"),
    ("1, 2, 3", "1, 2"),
    ("1, 2, 3", "1, 2, 3, 4"),
    ("2^{10}", "1000"),
    ("\\binom{5}{2}", "20"),
    ("5!", "25"),
    ("\\log_2 8", "8"),
    ("3+4i", "3-4i"),
    ("3+4i", "5"),
    ("\\frac{6}{8}", "\\frac{8}{6}"),
    ("1 \\times 10^{3}", "100"),
    ("-7", "7"),
    ("100", "10^3"),
    ("12", "21"),
    ("0", "1"),
    ("1", "0"),
    ("\\frac{22}{7}", "\\pi"),
    ("2\\pi", "\\pi"),
    ("e", "2.71"),
    ("4", "16"),
    ("x = 5", "x = 6"),
    ("y = 2x + 1", "y = 2x - 1"),
    ("\\infty", "-\\infty"),
    ("1000000", "1000001"),
    ("\\frac{1}{3}", "0.33"),
    ("-\\frac{1}{2}", "\\frac{1}{2}"),
    ("2", "\\sqrt{2}"),
    ("8", "2^{2}"),
    ("7", "seven hundred"),
    ("3", "abc"),
    ("3", "x"),
    ("\\frac{3}{2}", "\\frac{2}{3}"),
    ("9", "-9"),
    ("1/7", "0.14"),
    ("12", "13 dollars"),
    # hedges: several answers are a set, never equal to the single gold, whichever it is
    ("5", "5 or 6"),
    ("6", "5 or 6"),
    ("5", "5, 6"),
    ("6", "5, 6"),
    ("5", "x = 5 or x = 6"),
    ("6", "x = 5 or x = 6"),
    # no unit conversion: the answer must be in the unit the task asks for
    ("2 \\text{ m}", "200 \\text{ cm}"),
]
CASES = [(g, a, True) for g, a in EQUIVALENT] + [(g, a, False) for g, a in DIFFERENT]


def test_known_verdicts() -> None:
    assert len(CASES) >= 100
    with ThreadPoolExecutor(2) as pool:  # the worker pool has two processes
        results = list(pool.map(lambda case: check_math(case[0], case[1]), CASES))
    pairs = zip(CASES, results, strict=True)
    wrong = [(g, a, want, r.reason) for (g, a, want), r in pairs if r.correct != want]
    assert not wrong, wrong


@pytest.mark.parametrize("answer", ["2^{2^{30}}", "10^{10^{10^{10}}}", "\\frac{1}{0}", "((((((((((1"])
def test_pathological_answers_fail_without_hanging(answer: str) -> None:
    result = check_math("2", answer, timeout_s=1)
    assert not result.correct and result.reason


def test_long_answer_refused_before_parsing() -> None:
    result = check_math("1", "1+" * MAX_ANSWER_CHARS)
    assert not result.correct and "longer than" in result.reason


def test_pool_survives_a_killed_worker() -> None:
    from verifier.workers import verifier_pool

    pool = verifier_pool()
    with pytest.raises(Exception, match="no result"):
        pool.call("math", "2", "2^{2^{30}}", 30, timeout_s=0.5)  # seconds of work: killed
    assert check_math("\\frac{1}{2}", "0.5").correct  # a fresh worker took the killed one's place
