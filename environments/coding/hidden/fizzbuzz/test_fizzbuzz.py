from solution import fizzbuzz


def test_first_fifteen():
    assert fizzbuzz(15) == [
        "1",
        "2",
        "Fizz",
        "4",
        "Buzz",
        "Fizz",
        "7",
        "8",
        "Fizz",
        "Buzz",
        "11",
        "Fizz",
        "13",
        "14",
        "FizzBuzz",
    ]


def test_one():
    assert fizzbuzz(1) == ["1"]


def test_zero_and_negative():
    assert fizzbuzz(0) == []
    assert fizzbuzz(-3) == []


def test_long_run():
    out = fizzbuzz(100)
    assert len(out) == 100
    assert out[29] == "FizzBuzz" and out[98] == "Fizz" and out[99] == "Buzz" and out[96] == "97"
