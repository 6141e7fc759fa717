"""SciPy's array-API functions as a user calls them on a float64 vector x (values in (0.1, 0.9),
so every domain is met). One entry per function that SciPy's xp_capabilities table declares
array-API capable beyond NumPy in scipy.special, scipy.stats, scipy.integrate and
scipy.constants. Each returns an array (a result object's statistic)."""

import numpy as np
import scipy.constants as constants
import scipy.integrate as integrate
import scipy.special as special
import scipy.stats as stats


def _first(result):
    """The statistic of a result object, the first of a tuple, or the array itself."""
    if hasattr(result, "statistic"):
        return result.statistic
    if isinstance(result, tuple):
        return result[0]
    return result


def _half(x):
    return x[:6], x[6:]


CASES = {
    # scipy.special
    "special.chdtr": lambda x: special.chdtr(3.0, x * 4),
    "special.chdtrc": lambda x: special.chdtrc(3.0, x * 4),
    "special.entr": special.entr,
    "special.erf": special.erf,
    "special.erfc": special.erfc,
    "special.erfinv": lambda x: special.erfinv(x - 0.5),
    "special.expit": lambda x: special.expit(x * 6 - 3),
    "special.gammainc": lambda x: special.gammainc(2.5, x * 3),
    "special.gammaincc": lambda x: special.gammaincc(2.5, x * 3),
    "special.gammaln": lambda x: special.gammaln(x * 10),
    "special.i0": lambda x: special.i0(x * 5),
    "special.i0e": lambda x: special.i0e(x * 5),
    "special.i1": lambda x: special.i1(x * 5),
    "special.i1e": lambda x: special.i1e(x * 5),
    "special.log_ndtr": lambda x: special.log_ndtr(x * 10 - 5),
    "special.logit": special.logit,
    "special.multigammaln": lambda x: special.multigammaln(x * 5 + 2, 3),
    "special.ndtr": lambda x: special.ndtr(x * 6 - 3),
    "special.ndtri": special.ndtri,
    "special.polygamma": lambda x: special.polygamma(1, x * 5),
    "special.psi": lambda x: special.psi(x * 5),
    "special.rel_entr": lambda x: special.rel_entr(*_half(x)),
    "special.xlog1py": lambda x: special.xlog1py(*_half(x)),
    "special.xlogy": lambda x: special.xlogy(*_half(x)),
    "special.zeta": lambda x: special.zeta(x * 3 + 1.5, 1.0),
    "special.logsumexp": special.logsumexp,
    "special.softmax": special.softmax,
    "special.log_softmax": special.log_softmax,
    # scipy.constants
    "constants.convert_temperature": lambda x: constants.convert_temperature(x, "C", "K"),
    "constants.lambda2nu": lambda x: constants.lambda2nu(x),
    "constants.nu2lambda": lambda x: constants.nu2lambda(x),
    # scipy.integrate
    "integrate.trapezoid": integrate.trapezoid,
    "integrate.cumulative_trapezoid": lambda x: integrate.cumulative_trapezoid(x, dx=0.5),
    "integrate.cumulative_simpson": lambda x: integrate.cumulative_simpson(x, dx=0.5),
    "integrate.romb": lambda x: integrate.romb(x[:5], dx=0.5),
    # scipy.stats
    "stats.entropy": stats.entropy,
    "stats.differential_entropy": stats.differential_entropy,
    "stats.gmean": stats.gmean,
    "stats.hmean": stats.hmean,
    "stats.pmean": lambda x: stats.pmean(x, 1.5),
    "stats.tmean": lambda x: stats.tmean(x, (0.2, 0.8)),
    "stats.tvar": lambda x: stats.tvar(x, (0.2, 0.8)),
    "stats.tmin": lambda x: stats.tmin(x, 0.2),
    "stats.tmax": lambda x: stats.tmax(x, 0.8),
    "stats.tstd": stats.tstd,
    "stats.tsem": stats.tsem,
    "stats.moment": lambda x: stats.moment(x, 3),
    "stats.skew": stats.skew,
    "stats.kurtosis": stats.kurtosis,
    "stats.describe": lambda x: stats.describe(x).variance,
    "stats.skewtest": lambda x: _first(stats.skewtest(x)),
    "stats.kurtosistest": lambda x: _first(stats.kurtosistest(x)),
    "stats.normaltest": lambda x: _first(stats.normaltest(x)),
    "stats.jarque_bera": lambda x: _first(stats.jarque_bera(x)),
    "stats.sem": stats.sem,
    "stats.zscore": stats.zscore,
    "stats.gzscore": stats.gzscore,
    "stats.zmap": lambda x: stats.zmap(x, x[::-1] * 0.5 + 0.2),
    "stats.gstd": stats.gstd,
    "stats.iqr": stats.iqr,
    "stats.median_abs_deviation": stats.median_abs_deviation,
    "stats.trim_mean": lambda x: stats.trim_mean(x, 0.1),
    "stats.power_divergence": lambda x: _first(stats.power_divergence(x, x[::-1])),
    "stats.chisquare": lambda x: _first(stats.chisquare(x, x[::-1] * x.sum() / x[::-1].sum())),
    "stats.variation": stats.variation,
    "stats.kstat": lambda x: stats.kstat(x, 2),
    "stats.kstatvar": lambda x: stats.kstatvar(x, 2),
    "stats.boxcox_llf": lambda x: stats.boxcox_llf(0.5, x),
    "stats.yeojohnson_llf": lambda x: stats.yeojohnson_llf(0.5, x),
    "stats.bartlett": lambda x: _first(stats.bartlett(*_half(x))),
    "stats.circmean": stats.circmean,
    "stats.circvar": stats.circvar,
    "stats.circstd": stats.circstd,
    "stats.directional_stats": lambda x: stats.directional_stats(
        x.reshape(6, 2)).mean_direction,
    "stats.quantile": lambda x: stats.quantile(x, 0.3),
    "stats.alexandergovern": lambda x: _first(stats.alexandergovern(*_half(x))),
    "stats.kruskal": lambda x: _first(stats.kruskal(*_half(x))),
    "stats.friedmanchisquare": lambda x: _first(stats.friedmanchisquare(
        x[:3], x[3:6], x[5:8] * 0.9)),
    "stats.rankdata": stats.rankdata,
    "stats.fligner": lambda x: _first(stats.fligner(*_half(x))),
    "stats.mood": lambda x: _first(stats.mood(*_half(x))),
    "stats.mode": lambda x: _first(stats.mode(np.round(x * 3) if isinstance(x, np.ndarray)
                                              else x)),
    "stats.sigmaclip": lambda x: _first(stats.sigmaclip(x)),
    "stats.false_discovery_control": stats.false_discovery_control,
    "stats.chatterjeexi": lambda x: _first(stats.chatterjeexi(*_half(x))),
    "stats.epps_singleton_2samp": lambda x: _first(stats.epps_singleton_2samp(*_half(x))),
}

X = np.array([0.31, 0.72, 0.15, 0.56, 0.88, 0.43, 0.27, 0.64, 0.39, 0.81, 0.22, 0.58])
