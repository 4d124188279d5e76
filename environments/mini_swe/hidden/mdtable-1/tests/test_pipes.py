from mdtable import render


def test_pipe_in_cell_keeps_columns_aligned():
    assert render(["command", "meaning"], [["a|b", "pipe a into b"], ["ls", "list"]]) == (
        "| command | meaning       |\n"
        "| ------- | ------------- |\n"
        "| a\\|b    | pipe a into b |\n"
        "| ls      | list          |"
    )


def test_pipe_widens_the_column():
    text = render(["x"], [["||||"]])
    assert text == "| x        |\n| -------- |\n| \\|\\|\\|\\| |"


def test_pipe_in_header_and_alignment():
    text = render(["a|b", "n"], [["x", 1], ["yy", 22]], align=["right", "center"])
    lines = text.splitlines()
    assert len({len(line) for line in lines}) == 1
    assert lines[0] == "| a\\|b |  n  |"
    assert lines[2] == "|    x |  1  |"
