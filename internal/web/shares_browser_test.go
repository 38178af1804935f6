package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/fairwayhq/fairway"
	"github.com/stretchr/testify/require"
)

// TestFairSharesInABrowser drives the fairness and limits views of a real
// fairway dev in headless Chromium: the fairness view draws each tenant's
// share of the slot-time as a bar with a mark at its weighted fair share,
// with the API's figures; an admin sets a weight inline (a refused one is
// explained, naming the field) and weighs a group that ran nothing; the
// limits view lists a rate limit set over NATS, and an admin adds one and
// removes it; the read-only role sees the same with no control. With
// -screenshots DIR it writes shares.png and rates.png.
func TestFairSharesInABrowser(t *testing.T) {
	d := startDev(t)
	ctx := t.Context()
	var ids []string
	for _, g := range []string{"acme", "globex", "acme", "globex"} {
		job, err := d.client.SubmitWait(ctx, fairway.Submission{Group: g, Task: "sleep", Args: []byte(`{"seconds": 0.3}`)})
		require.NoError(t, err)
		ids = append(ids, job.ID)
	}
	for i, id := range ids {
		d.state(t, []string{"acme", "globex"}[i%2], id, fairway.StateSuccess)
	}
	_, err := d.client.SetRateLimit(ctx, "task:echo", "100/s")
	require.NoError(t, err)

	b := browser(t)
	do(t, b, "log in through the printed link", chromedp.Navigate(d.link))
	until(t, b, "the overview", `document.querySelector("#view").dataset.ready === "#/overview"`)
	eval[bool](t, b, `(window.confirm = () => true, true)`) // "Remove the rate limit?": yes

	// Fairness: a bar per tenant, its share and fair share as the API has
	// them, the mark at the fair share.
	open(t, b, "#/fairness")
	var shares struct {
		Groups []fairway.GroupShare `json:"groups"`
	}
	d.get(t, "/api/shares?window=1h", &shares)
	require.Len(t, shares.Groups, 2)
	require.Equal(t, 2, count(t, b, "#share-table tbody tr"))
	row := func(group string) string { return `#share-table tr[data-group="` + group + `"]` }
	for _, s := range shares.Groups {
		require.Equal(t, fmt.Sprintf("%.1f%%", 100*s.Share), text(t, b, row(s.Group)+" td.share"), s.Group)
		require.Equal(t, "50.0%", text(t, b, row(s.Group)+" td.fair"), s.Group)
		require.InDelta(t, 100*s.Share, eval[float64](t, b, `parseFloat(document.querySelector('`+row(s.Group)+` .sharebar .fill').style.width)`), 0.01)
		require.Equal(t, "50%", eval[string](t, b, `document.querySelector('`+row(s.Group)+` .sharebar .fair').style.left`))
	}
	require.Equal(t, 2, count(t, b, "#share-table .weight-form"), "an admin can weigh each")

	setWeight := func(form, value string) {
		t.Helper()
		eval[bool](t, b, fmt.Sprintf(`(() => {
			const i = document.querySelector(%q);
			i.value = %q;
			i.dispatchEvent(new Event("input", { bubbles: true }));
			return true;
		})()`, form+` input[name="weight"]`, value))
		click(t, b, form+` button[type="submit"]`)
	}
	setWeight(row("acme"), "0")
	until(t, b, "the refusal, naming its field", `(document.querySelector("#weight-error") || {textContent: ""}).textContent.startsWith("acme: weight: ")`)
	require.Equal(t, "true", eval[string](t, b, `document.querySelector('`+row("acme")+` input[name="weight"]').getAttribute("aria-invalid")`))
	setWeight(row("acme"), "3")
	until(t, b, "acme's fair share with weight 3", `document.querySelector('`+row("acme")+` td.fair').textContent === "75.0%"`)
	require.Equal(t, "25.0%", text(t, b, row("globex")+" td.fair"))
	require.Equal(t, "3", eval[string](t, b, `document.querySelector('`+row("acme")+` input[name="weight"]').value`))
	require.Equal(t, "75%", eval[string](t, b, `document.querySelector('`+row("acme")+` .sharebar .fair').style.left`), "the mark moved")
	require.Zero(t, count(t, b, "#weight-error"), "a weight set clears the refusal")
	groups, err := d.client.Groups(ctx, "1h")
	require.NoError(t, err)
	for _, g := range groups {
		if g.Group == "acme" {
			require.Equal(t, 3.0, g.Weight, "the coordinators have it")
		}
	}
	// A group that ran nothing: weighed from the form below the table.
	eval[bool](t, b, `(() => {
		const f = document.querySelector("#weight-form");
		for (const [k, v] of [["group", "initech"], ["weight", "2"]]) {
			f.elements[k].value = v;
			f.elements[k].dispatchEvent(new Event("input", { bubbles: true }));
		}
		return true;
	})()`)
	click(t, b, `#weight-form button[type="submit"]`)
	until(t, b, "initech's row", `document.querySelector('`+row("initech")+`') !== null`)
	require.Equal(t, "—", text(t, b, row("initech")+" td.fair"), "it ran nothing: no fair share")
	require.Zero(t, count(t, b, row("initech")+" .sharebar .fair"))
	require.Equal(t, "75.0%", text(t, b, row("acme")+" td.fair"), "a group that ran nothing does not count")
	shootElement(t, b, "shares.png", "#shares")

	// Limits: the rate limit set over NATS, listed with the concurrency
	// limits; one added from the form (a refused rate explained first),
	// then removed.
	open(t, b, "#/limits")
	rate := func(scope string) string { return `#rate-table tr[data-scope="` + scope + `"]` }
	require.Equal(t, 1, count(t, b, "#rate-table tbody tr"))
	require.Equal(t, "100/s", text(t, b, rate("task:echo")+" td.rate"))
	require.Contains(t, text(t, b, rate("task:echo")), "task echo, across the cluster")
	setRate := func(task, group, value string) {
		t.Helper()
		eval[bool](t, b, fmt.Sprintf(`(() => {
			const f = document.querySelector("#rate-form");
			for (const [k, v] of [["task", %q], ["group", %q], ["rate", %q]]) {
				f.elements[k].value = v;
				f.elements[k].dispatchEvent(new Event("input", { bubbles: true }));
			}
			return true;
		})()`, task, group, value))
		click(t, b, `#rate-form button[type="submit"]`)
	}
	setRate("sleep", "*", "10")
	until(t, b, "the refusal, naming its field", `document.querySelector("#rate-error").textContent.startsWith("rate: ")`)
	require.Equal(t, "true", eval[string](t, b, `document.querySelector('#rate-form input[name="rate"]').getAttribute("aria-invalid")`))
	setRate("sleep", "*", "5/s")
	until(t, b, "the new rate limit's row", `document.querySelector('`+rate("task:sleep,group:*")+`') !== null`)
	require.Equal(t, "5/s", text(t, b, rate("task:sleep,group:*")+" td.rate"))
	require.Empty(t, text(t, b, "#rate-error"), "a rate set clears the refusal")
	rates, err := d.client.RateLimits(ctx)
	require.NoError(t, err)
	require.Len(t, rates, 2, "the coordinators have it")
	shootElement(t, b, "rates.png", "#rates")
	click(t, b, rate("task:sleep,group:*")+" button.danger")
	until(t, b, "the row is gone", `document.querySelector('`+rate("task:sleep,group:*")+`') === null`)
	rates, err = d.client.RateLimits(ctx)
	require.NoError(t, err)
	require.Len(t, rates, 1, "task:echo is left")

	// The read-only role: the same figures, no control.
	r := browser(t)
	do(t, r, "log in read-only", chromedp.Navigate(d.url+"#token="+d.readToken))
	until(t, r, "the overview", `document.querySelector("#view").dataset.ready === "#/overview"`)
	open(t, r, "#/fairness")
	require.Equal(t, 3, count(t, r, "#share-table tbody tr"))
	require.Equal(t, "3", text(t, r, `#share-table tr[data-group="acme"] td.weight`))
	require.Zero(t, count(t, r, ".weight-form"))
	require.Zero(t, count(t, r, "#weight-form"))
	open(t, r, "#/limits")
	require.Equal(t, 1, count(t, r, "#rate-table tbody tr"))
	require.Zero(t, count(t, r, "#rate-form"), "no form to set one")
	require.Zero(t, count(t, r, "#rate-table button"), "no remove buttons")
}
