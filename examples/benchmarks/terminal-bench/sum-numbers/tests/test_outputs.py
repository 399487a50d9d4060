from pathlib import Path


def test_sum():
    assert Path("sum.txt").read_text().strip() == "108"


def test_numbers_untouched():
    assert Path("numbers.txt").read_text().split() == ["4", "8", "15", "16", "23", "42"]
