"""Stop words dropped before BM25: frequent words that carry no topic."""

ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all am an and any are aren't as at be because been before being below
    between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each
    few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself
    him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most
    mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't
    she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then
    there there's these they they'd they'll they're they've this those through to too under until up very was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's
    whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves
    s t d ll m o re ve y just also""".split()
)

CHINESE_STOPWORDS = frozenset(
    """的 了 和 是 就 都 而 及 与 着 或 一个 没有 我们 你们 他们 她们 它们 这 那 之 也 在 有 被 把 让 给 从 对 于 吗 呢
    吧 啊 呀 哦 嗯 么 又 很 还 但 但是 因为 所以 如果 虽然 然后 这个 那个 这些 那些 什么 怎么 为什么 哪 哪里 自己 可以
    会 要 能 去 来 上 下 中 里 个 不 没 说 得 地 过 到 等""".split()
)
