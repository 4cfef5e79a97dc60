"""Example prompts for the app, each chosen to show something."""

from dataclasses import dataclass

from explorer.loading.catalog import BUNDLED_LABEL, SMOLLM2_LABEL

# One line three times: each copy tokenizes alike (no space before it), so a head that attends from
# a token to the one after its earlier occurrence draws a clean stripe.
INDUCTION = "\n".join(["Speak, Horatio: the pale moon sings of iron bells and crooked wine."] * 3)

SHAKESPEARE_LINE = "To be, or not to be, that is the question:"

LONG_PASSAGE = """\
To be, or not to be, that is the question:
Whether 'tis nobler in the mind to suffer
The slings and arrows of outrageous fortune,
Or to take arms against a sea of troubles
And by opposing end them. To die—to sleep,
No more; and by a sleep to say we end
The heart-ache and the thousand natural shocks
That flesh is heir to: 'tis a consummation
Devoutly to be wish'd. To die, to sleep;
To sleep, perchance to dream—ay, there's the rub:
For in that sleep of death what dreams may come,
When we have shuffled off this mortal coil,
Must give us pause—there's the respect
That makes calamity of so long life.
For who would bear the whips and scorns of time,
Th'oppressor's wrong, the proud man's contumely,
The pangs of dispriz'd love, the law's delay,
The insolence of office, and the spurns
That patient merit of th'unworthy takes,
When he himself might his quietus make
With a bare bodkin? Who would fardels bear,
To grunt and sweat under a weary life,
But that the dread of something after death,
The undiscover'd country, from whose bourn
No traveller returns, puzzles the will,
And makes us rather bear those ills we have
Than fly to others that we know not of?
Thus conscience does make cowards of us all,
And thus the native hue of resolution
Is sicklied o'er with the pale cast of thought,
And enterprises of great pitch and moment
With this regard their currents turn awry
And lose the name of action."""

UNICODE = "Café ☕ — naïve façade, «quoted» & <b>bold?</b> 🙂👍🏽 日本語! (¿Qué?) “Ay, there’s the rub…”"

# What each example shows, as the picker labels it.
LABELLED = {
    "a line of Hamlet: previous-token heads": SHAKESPEARE_LINE,
    "induction: a line written three times": INDUCTION,
    "a long passage: distance and sinks": LONG_PASSAGE,
    "characters, not bytes: accents, emoji, markup": UNICODE,
}
EXAMPLES = list(LABELLED.values())
EXAMPLE_LABELS = list(LABELLED)
# Interventions. The induction line written twice, cut where the second copy repeats " silver": the
# bundled model's induction heads 3.0–3.2 (all reading kv head 0) carry that copy.
COPY = (
    "Speak, Horatio: the pale moon sings of silver bells and crooked wine.\n"
    "Speak, Horatio: the pale moon sings of"
)
INDUCTION_HEADS = [(3, 0), (3, 1), (3, 2)]  # of the bundled model
ABLATION_EXAMPLES = [(COPY, INDUCTION_HEADS)]  # (prompt, heads to ablate)
# Said beside the examples that swap the model, where a person reads before they click.
SWAPS_MODEL = (
    "Each example runs on the model its label names: when another model is loaded, that model is "
    "loaded first (the picker above then names it)."
)
ABLATION_LABELS = ["heads 3.0–3.2 carry a copy · loads the bundled model"]


@dataclass(frozen=True)
class PatchingExample:
    """Two prompts of the same number of tokens, and the answer each one's context points to."""

    clean: str
    corrupted: str
    answer: str  # one token: what the clean prompt should predict next
    distractor: str  # one token: what the corrupted prompt points to instead
    model: str  # the model it is meant for, as the app's model picker labels it
    shows: str  # what it shows and the model it loads, as the app labels it


PATCHING_EXAMPLES = {
    # Indirect-object identification: the corrupted prompt changes the subject's second mention, so the
    # token count stays equal (14 tokens in SmolLM2's tokenizer, first difference at position 9). The
    # ranking docs/models.md reports is this pair's.
    "IOI (SmolLM2)": PatchingExample(
        clean="When Mary and John went to the store, John gave a drink to",
        corrupted="When Mary and John went to the store, Mary gave a drink to",
        answer=" Mary",
        distractor=" John",
        model=SMOLLM2_LABEL,
        shows="indirect object, one mention changed · loads SmolLM2",  # past 60 characters Gradio cuts it
    ),
    # Copying: the corrupted prompt changes the earlier occurrence, so the second copy should follow.
    "induction (bundled model)": PatchingExample(
        clean=COPY,
        corrupted=COPY.replace(" silver", " golden"),
        answer=" silver",
        distractor=" golden",
        model=BUNDLED_LABEL,
        shows="a copy: silver or golden? · loads the bundled model",
    ),
}
# Said beside the patching prompts: the corruption a sweep asks about decides what its ranking means.
CORRUPTIONS = (
    "**Which corruption?** Opening the tab fills the prompts from the one on screen with its two names "
    "swapped everywhere (“When John and Mary went to the store, Mary gave a drink to”): every mention "
    "changes, so a head ranks high for carrying who the names are as much as for working out the answer. "
    "The indirect-object example below changes only the second mention of the subject (“…, Mary gave a "
    "drink to”): the same names, only which one is said twice differs, so it asks which heads find the "
    "name said once and move it to the answer (on SmolLM2 23.3 brings back most, then 29.1 and 20.0, "
    "while 24.4 pushes the other way). The two rank heads differently: under the ranking, the tokens "
    "the sweep's corrupted prompt changes."
)
