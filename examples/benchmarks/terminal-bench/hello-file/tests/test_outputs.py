from pathlib import Path


def test_file_exists():
    assert Path("hello.txt").is_file(), "hello.txt is missing"


def test_content():
    assert Path("hello.txt").read_text().strip() == "Hello, world!"
