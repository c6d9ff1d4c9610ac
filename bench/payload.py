"""A realistic processCreate request for the benchmarks: steps of 5 actions with parts, serials, tools,
measurements and confirmations (20 steps: about 60 KB of JSON)."""
import json

MUTATION = "mutation ProcessCreate($input: ProcessCreateInput!) { processCreate(input: $input) }"
ACTIONS_PER_STEP = 5


def action(step, number):
    """One action; the mix varies with its position so derivations (torque, scans, BOM) all have work."""
    ident = f"s{step:04d}_a{number}"
    kind = number % ACTIONS_PER_STEP
    result = {
        "id": ident,
        "description": {"text": f"Step {step}, action {number}: place the part in the fixture, check its "
                                f"orientation against the drawing and "
                                f"{'tighten the screws to the specified torque' if kind == 1 else 'seat it fully'}.",
                        "bold": kind == 0},
        "inputParts": [
            {"part": {"id": f"part_{step:04d}_{number}", "description": f"Bracket {step}-{number}, zinc plated"},
             "quantity": 2},
            {"part": {"id": f"screw_m{4 + kind}", "description": f"Screw M{4 + kind} x 12, ISO 4762"},
             "quantity": 4},
        ],
        "toolUsed": {"id": f"tool_{kind}", "name": ["Torque wrench 5-25 Nm", "Screwdriver T20", "Caliper",
                                                   "Press", "Crimping tool"][kind],
                     "description": "Calibrated, see the tool board at the station"},
    }
    if kind == 2:
        result["inputParts"][0]["part"]["serial"] = {"id": f"sn_{step:04d}", "name": f"Serial of bracket {step}",
                                                     "pattern": "^SN[0-9]{8}$"}
    if kind in (1, 2):
        result["measurement"] = {"measured": "Tightening torque" if kind == 1 else "Gap width",
                                 "units": "torque-Nm" if kind == 1 else "length-mm", "min": 8.5, "max": 9.5}
    if kind in (1, 3):
        result["confirmation"] = {"confirmed": "The part sits flush and the marking faces the operator."}
    if kind == 4:
        result["outputPart"] = {"id": f"assy_{step:04d}", "description": f"Sub-assembly after step {step}"}
    return result


def process(identifier="bench_process", steps=20):
    """A ProcessInput dict with `steps` steps of ACTIONS_PER_STEP actions each."""
    return {
        "id": identifier,
        "name": "Gearbox housing, final assembly",
        "description": "Assembly of the gearbox housing with bearings, seals and cover; torque-checked.",
        "partNumber": "GB-4410-A",
        "startBehavior": "CONFIRM",
        "endBehavior": "SUMMARY",
        "autoSignoutMinutes": 30,
        "steps": [{
            "id": f"step_{step:04d}",
            "name": f"Step {step}: mount and fasten",
            "instructionText": {"text": f"Mount the parts of step {step} and fasten them in the order shown.",
                                "color": "#202020"},
            "actions": [action(step, number) for number in range(ACTIONS_PER_STEP)],
            "alerts": [{"severity": "CAUTION", "text": "Wear gloves: sharp edges."}] if step % 5 == 0 else None,
        } for step in range(steps)],
    }


def request_body(identifier="bench_process", steps=20):
    """The JSON body of a processCreate request, as bytes."""
    return json.dumps({"query": MUTATION, "variables": {"input": {"process": process(identifier, steps)}}},
                      separators=(",", ":")).encode()


if __name__ == "__main__":
    print(f"{len(request_body())} bytes")
