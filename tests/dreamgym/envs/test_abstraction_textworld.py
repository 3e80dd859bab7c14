"""TextWorld pre-normaliser (dreamgym.envs.abstraction.normalise_textworld_text)."""

from __future__ import annotations

from dreamgym.envs.abstraction import abstract_observation, normalise_textworld_text

BANNER = (
    "\n\n\n                    ________  ________  __    __  ________        \n"
    "                   |        \\|        \\|  \\  |  \\|        \\       \n"
    "                    \\$$$$$$$$| $$$$$$$$| $$  | $$ \\$$$$$$$$       \n\n"
)
ROOM = (
    "-= Studio =-\nYou are in a studio. A typical kind of place.\n\n\n\n"
    "There is an exit to the south. Don't worry, it is unguarded.\n\n"
    "There is a coin on the floor.\n"
)
PROMPT = "\n\n>                                                  -= Studio =-0/5"
ENDING = (
    "\nYou pick up the coin from the ground.\n\n\n\nYour score has just gone up by one point.\n\n\n"
    "                    *** The End ***\n\nYou scored 1 out of a possible 1, in 6 turns.\n\n\n"
    "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?\n>    "
    "       -= Studio =-0/5"
)


def test_normalise_textworld_text_strips_banner_header_and_prompt():
    text = normalise_textworld_text(BANNER + ROOM + PROMPT)

    assert text.startswith("You are in the studio.\nYou are in a studio.")
    assert "$" not in text and "-=" not in text and ">" not in text
    assert text.endswith("There is a coin on the floor.")


def test_normalise_textworld_text_drops_end_of_game_lines_keeps_feedback():
    text = normalise_textworld_text(ENDING)

    assert text == (
        "You pick up the coin from the ground.\n\n\n\nYour score has just gone up by one point."
    )


def test_abstract_observation_of_normalised_text_keeps_coin_and_exits():
    obs = abstract_observation(normalise_textworld_text(ROOM + PROMPT), ["go south", "take coin"])

    assert obs == (
        "You are in the studio. You are in a studio. A typical kind of place. There is an exit "
        "to the south. Don't worry, it is unguarded. There is a coin on the floor."
    )


def test_abstract_observation_twx_behaviour_is_unchanged():
    raw = (
        "You are in the pantry. In one part of the room you see a shelf. You also see a coin. "
        "\nTo the North you see the kitchen. "
    )

    obs = abstract_observation(raw, ["take coin", "move north", "look around", "inventory"])

    assert obs == "You are in the pantry. You see a coin. To the North you see the kitchen."
